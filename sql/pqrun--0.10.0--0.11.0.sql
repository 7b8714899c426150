/* sql/pqrun--0.10.0--0.11.0.sql — ALTER EXTENSION pqrun UPDATE from 0.10.0.
 *
 * 0.11.0 adds rate limits per concurrency key (set_key_rate_limit: a token
 * bucket for each key of a queue, or a key's own) and a weight per job
 * (enqueue's rate_weight, enqueue_batch's "rate_weight"): the tokens a
 * claim of the job takes from each rate limit that applies to it.
 * queue_controls shows how many keys a rate limit per key holds back.
 *
 * It also corrects the tokens that queue_controls shows for a bucket that
 * is not full: OPERATOR() binds + and * alike, so the view added the rate
 * to the tokens before multiplying by the seconds since the refill; and
 * metrics' pqrun_key_limit for every key of a queue that also has a limit
 * of its own, which showed the queue's.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.11.0'" to load this file. \quit

ALTER TABLE pqrun.job_live ADD COLUMN rate_weight int;
ALTER TABLE pqrun.job_done ADD COLUMN rate_weight int;

CREATE OR REPLACE VIEW pqrun.jobs AS
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       NULL::timestamptz AS finished_at, NULL::int AS duration_ms, NULL::jsonb AS result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_live
	UNION ALL
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       finished_at, duration_ms, result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_done;

/* enqueue gains an argument: the old function goes, and whoever could run it
 * can run the new one. */
DO $$
DECLARE
	grantees regrole[];
	role regrole;
BEGIN
	SELECT pg_catalog.array_agg(DISTINCT a.grantee::pg_catalog.regrole) INTO grantees
	  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
	 WHERE p.oid OPERATOR(pg_catalog.=)
	       'pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text)'::pg_catalog.regprocedure
	   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
	   AND a.grantee OPERATOR(pg_catalog.<>) 0;
	DROP FUNCTION pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text);
	CREATE FUNCTION pqrun.enqueue(
		job_type        text,
		payload         jsonb       DEFAULT '{}',
		priority        int         DEFAULT 0,
		run_after       timestamptz DEFAULT pg_catalog.now(),
		max_attempts    int         DEFAULT 5,
		timeout_seconds int         DEFAULT NULL,
		dedupe_key      text        DEFAULT NULL,
		queue           text        DEFAULT 'default',
		depends_on      bigint[]    DEFAULT NULL,
		fifo_key        text        DEFAULT NULL,
		concurrency_key text        DEFAULT NULL,
		rate_weight     int         DEFAULT NULL)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pqrun_enqueue' LANGUAGE c VOLATILE;
	ALTER FUNCTION pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)
		SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
	REVOKE ALL ON FUNCTION pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)
		FROM PUBLIC;
	FOREACH role IN ARRAY COALESCE(grantees, '{}') LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION'
		                          ' pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)'
		                          ' TO %s', role);
	END LOOP;
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_producer(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int),'
	               ' pqrun.enqueue_batch(jsonb), pqrun.cancel(bigint, text) TO %s', role);
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_worker(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs TO %s', role);
	/* await_jobs cannot be SECURITY DEFINER (it commits): it reads job_live
	 * and the flow controls as its caller. */
	EXECUTE format('GRANT SELECT ON pqrun.job_live, pqrun.queue_control TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.pickup(text, text[], text[], int, interval),'
	               ' pqrun.mark_done(bigint, jsonb, uuid), pqrun.mark_done_batch(bigint[], uuid[]),'
	               ' pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int),'
	               ' pqrun.mark_error(bigint, text, boolean, uuid, interval),'
	               ' pqrun.heartbeat(bigint, uuid, jsonb, interval),'
	               ' pqrun.release(bigint, uuid), pqrun.snooze(bigint, interval, uuid),'
	               ' pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int),'
	               ' pqrun.enqueue_batch(jsonb) TO %s', role);
	EXECUTE format('GRANT EXECUTE ON PROCEDURE pqrun.await_jobs(text[], text[], interval, boolean) TO %s', role);
END $$;

ALTER TABLE pqrun.queue_control
	ADD COLUMN rate_per_key double precision,
	ADD COLUMN burst_per_key int,
	DROP CONSTRAINT queue_control_queue_row,
	ADD CONSTRAINT queue_control_queue_row CHECK ((max_running_per_key IS NULL AND rate_per_key IS NULL AND NOT keyed)
	                                              OR (job_type IS NULL AND concurrency_key IS NULL)),
	ADD CONSTRAINT queue_control_rate_per_key CHECK (rate_per_key OPERATOR(pg_catalog.>) 0
	                                                 AND burst_per_key OPERATOR(pg_catalog.>=) 1),
	ADD CONSTRAINT queue_control_rate_per_key_burst CHECK ((rate_per_key IS NULL) OPERATOR(pg_catalog.=)
	                                                       (burst_per_key IS NULL));

/* For each rate limit per key, the keys whose buckets are below full (the
 * others hold their burst) and those of them without a token now. */
CREATE FUNCTION pqrun._key_buckets(OUT control_id bigint, OUT keys int, OUT keys_without_token int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_key_buckets' LANGUAGE c VOLATILE ROWS 10
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun._key_buckets() FROM PUBLIC;

/* Whoever reads queue_controls (every role that may run _flow_counters) may
 * run the function it now reads too. */
DO $$
DECLARE
	role regrole;
BEGIN
	FOR role IN SELECT DISTINCT a.grantee::pg_catalog.regrole
	              FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
	             WHERE p.oid OPERATOR(pg_catalog.=) 'pqrun._flow_counters()'::pg_catalog.regprocedure
	               AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	               AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
	               AND a.grantee OPERATOR(pg_catalog.<>) 0
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION pqrun._key_buckets() TO %s', role);
	END LOOP;
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_monitor(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs, pqrun.job_attempts, pqrun.queue_stats, pqrun.queue_controls,'
	               ' pqrun.workers, pqrun.health TO %s', role);
	IF to_regclass('pqrun.periodic') IS NOT NULL THEN
		EXECUTE format('GRANT SELECT ON pqrun.periodic TO %s', role);
	END IF;
	/* Functions in a view run with the privileges of whoever reads it. */
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.metrics(), pqrun._queue_counters(), pqrun._flow_counters(),'
	               ' pqrun._key_buckets() TO %s', role);
END $$;

CREATE OR REPLACE VIEW pqrun.queue_controls AS
	WITH live AS (
		SELECT j.queue, j.job_type, j.concurrency_key,
		       pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'RUNNING') AS running,
		       pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'READY') AS ready
		  FROM pqrun.job_live j
		 WHERE j.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT queue FROM pqrun.queue_control))
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT c.queue, c.job_type, c.paused, c.max_running,
	       COALESCE(pg_catalog.sum(l.running), 0)::bigint AS running,
	       COALESCE(pg_catalog.sum(l.ready), 0)::bigint AS ready,
	       c.rate, c.burst,
	       CASE WHEN c.rate IS NOT NULL
	            THEN LEAST(c.burst, COALESCE(f.tokens OPERATOR(pg_catalog.+)
	                                         (c.rate OPERATOR(pg_catalog.*)
	                                          pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()
	                                                               OPERATOR(pg_catalog.-) f.refilled_at)),
	                                         c.burst)) END AS tokens,
	       c.updated_at, c.concurrency_key, c.max_running_per_key, c.keyed,
	       CASE WHEN c.job_type IS NULL AND c.concurrency_key IS NULL THEN
	           (SELECT COALESCE(pg_catalog.max(k.running), 0)::bigint
	              FROM (SELECT pg_catalog.sum(b.running) AS running FROM live b
	                     WHERE b.queue OPERATOR(pg_catalog.=) c.queue AND b.concurrency_key IS NOT NULL
	                     GROUP BY b.concurrency_key) k) END AS busiest_key_running,
	       c.rate_per_key, c.burst_per_key,
	       CASE WHEN c.rate_per_key IS NOT NULL THEN COALESCE(b.keys_without_token, 0) END AS rate_limited_keys
	  FROM pqrun.queue_control c
	  LEFT JOIN live l ON l.queue OPERATOR(pg_catalog.=) c.queue
	                  AND (c.job_type IS NULL OR l.job_type OPERATOR(pg_catalog.=) c.job_type)
	                  AND (c.concurrency_key IS NULL OR l.concurrency_key OPERATOR(pg_catalog.=) c.concurrency_key)
	  LEFT JOIN pqrun._flow_counters() f ON f.control_id OPERATOR(pg_catalog.=) c.id
	  LEFT JOIN pqrun._key_buckets() b ON b.control_id OPERATOR(pg_catalog.=) c.id
	 GROUP BY c.id, f.tokens, f.refilled_at, b.keys_without_token;

/* A token bucket for each concurrency key of the queue (concurrency_key
 * NULL: every key without a rate limit of its own), or for the one key
 * given: per_second tokens, at most burst; NULL removes it. */
CREATE FUNCTION pqrun.set_key_rate_limit(queue text, per_second double precision, burst int DEFAULT 1,
                                         concurrency_key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_key_rate_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun.set_key_rate_limit(text, double precision, int, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pqrun.metrics()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.concat_ws(E'\n',
	  '# HELP pqrun_jobs Jobs by queue, job type and status.',
	  '# TYPE pqrun_jobs gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_jobs{queue=%s,job_type=%s,status="%s"} %s',
	           pg_catalog.to_json(s.queue), pg_catalog.to_json(s.job_type), st.status, st.n), E'\n'
	           ORDER BY s.queue, s.job_type, st.status)
	     FROM pqrun.queue_stats s,
	          LATERAL (VALUES ('BLOCKED', s.blocked), ('READY', s.ready), ('RUNNING', s.running),
	                          ('DONE', s.done), ('FAILED', s.failed), ('CANCELLED', s.cancelled)) AS st(status, n)),
	  '# HELP pqrun_oldest_ready_age_seconds Age of the oldest runnable job.',
	  '# TYPE pqrun_oldest_ready_age_seconds gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_oldest_ready_age_seconds{queue=%s,job_type=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(job_type),
	           COALESCE(pg_catalog.date_part('epoch', oldest_ready_age), 0)), E'\n' ORDER BY queue, job_type)
	     FROM pqrun.queue_stats),
	  '# HELP pqrun_done_last_5min Jobs finished DONE in the last five minutes.',
	  '# TYPE pqrun_done_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_done_last_5min{queue=%s,job_type=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(job_type), done_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM pqrun.queue_stats),
	  '# HELP pqrun_horizon_xact_age Transaction age (in XIDs) of the backend holding back vacuum.',
	  '# TYPE pqrun_horizon_xact_age gauge',
	  (SELECT pg_catalog.format('pqrun_horizon_xact_age %s', COALESCE(horizon_xact_age, 0)) FROM pqrun.health),
	  '# HELP pqrun_dead_tuples Dead tuples in pqrun''s tables.',
	  '# TYPE pqrun_dead_tuples gauge',
	  (SELECT pg_catalog.format(E'pqrun_dead_tuples{table="job_live"} %s\npqrun_dead_tuples{table="job_done"} %s',
	           COALESCE(job_live_dead_tuples, 0), COALESCE(job_done_dead_tuples, 0)) FROM pqrun.health),
	  '# HELP pqrun_queue_paused Whether pickups skip the queue (pqrun.pause_queue).',
	  '# TYPE pqrun_queue_paused gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_queue_paused{queue=%s} %s',
	           pg_catalog.to_json(queue), CASE WHEN paused THEN 1 ELSE 0 END), E'\n' ORDER BY queue)
	     FROM pqrun.queue_controls WHERE job_type IS NULL),
	  '# HELP pqrun_concurrency_limit Most jobs RUNNING at once (pqrun.set_concurrency_limit; job_type "" for the queue).',
	  '# TYPE pqrun_concurrency_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_concurrency_limit{queue=%s,job_type=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(job_type, '')), max_running), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM pqrun.queue_controls WHERE max_running IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_concurrency_running Jobs RUNNING under a concurrency limit.',
	  '# TYPE pqrun_concurrency_running gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_concurrency_running{queue=%s,job_type=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(job_type, '')), running), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM pqrun.queue_controls WHERE max_running IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_key_limit Most jobs of one concurrency key RUNNING at once (pqrun.set_key_limit; concurrency_key "" for every key without its own).',
	  '# TYPE pqrun_key_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_limit{queue=%s,concurrency_key=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN max_running_per_key ELSE max_running END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM pqrun.queue_controls
	    WHERE (concurrency_key IS NOT NULL AND max_running IS NOT NULL) OR max_running_per_key IS NOT NULL),
	  '# HELP pqrun_key_running Jobs RUNNING of the concurrency key (concurrency_key "": of the busiest key without a limit of its own).',
	  '# TYPE pqrun_key_running gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_running{queue=%s,concurrency_key=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN busiest_key_running ELSE running END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM pqrun.queue_controls
	    WHERE (concurrency_key IS NOT NULL AND max_running IS NOT NULL) OR max_running_per_key IS NOT NULL),
	  '# HELP pqrun_rate_limit Most claims per second (pqrun.set_rate_limit; job_type "" for the queue).',
	  '# TYPE pqrun_rate_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rate_limit{queue=%s,job_type=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(job_type, '')), rate), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM pqrun.queue_controls WHERE rate IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_rate_tokens Claims a rate limit allows at once now.',
	  '# TYPE pqrun_rate_tokens gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rate_tokens{queue=%s,job_type=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(job_type, '')), tokens), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM pqrun.queue_controls WHERE rate IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_key_rate_limit Most claims per second of one concurrency key (pqrun.set_key_rate_limit; concurrency_key "" for every key without its own).',
	  '# TYPE pqrun_key_rate_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_limit{queue=%s,concurrency_key=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN rate_per_key ELSE rate END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM pqrun.queue_controls
	    WHERE (concurrency_key IS NOT NULL AND rate IS NOT NULL) OR rate_per_key IS NOT NULL),
	  '# HELP pqrun_key_rate_tokens Claims a key''s own rate limit allows at once now.',
	  '# TYPE pqrun_key_rate_tokens gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_tokens{queue=%s,concurrency_key=%s} %s',
	           pg_catalog.to_json(queue), pg_catalog.to_json(concurrency_key), tokens), E'\n'
	           ORDER BY queue, concurrency_key)
	     FROM pqrun.queue_controls WHERE rate IS NOT NULL AND concurrency_key IS NOT NULL),
	  '# HELP pqrun_key_rate_limited Keys of the queue without a token in their bucket now (pqrun.set_key_rate_limit).',
	  '# TYPE pqrun_key_rate_limited gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_limited{queue=%s} %s',
	           pg_catalog.to_json(queue), rate_limited_keys), E'\n' ORDER BY queue)
	     FROM pqrun.queue_controls WHERE rate_per_key IS NOT NULL)) || E'\n'
$$;
