/* sql/pqrun--0.20.0--0.21.0.sql — ALTER EXTENSION pqrun UPDATE from 0.20.0.
 *
 * 0.21.0 makes watching a queue cost what the screen shows: the unfinished
 * jobs per queue and job type are counted by the database's maintenance
 * worker (pqrun.live_counts, pqrun.queue_overview) instead of by every
 * reader, the flow controls can be read without counting the backlog
 * (pqrun.flow_controls), metrics() reads both, and pqrun.job_dependents
 * lists what waits for a job by its edges. What the grant_* functions give
 * and distribute() delegates is one list, pqrun._api().
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.21.0'" to load this file. \quit

/* The unfinished jobs of each queue and job type as the database's
 * maintenance worker last counted them, every pqrun.count_interval (0.21.0):
 * pqrun.queue_overview and metrics() read as many rows as they show
 * instead of counting the backlog at every look. READY jobs due at the
 * count are `ready`, those due later `delayed`; `oldest_ready_at` is the
 * run_after of the oldest due one. A pair with no unfinished job keeps a row
 * of zeros while shared memory counts its finished jobs. Not dumped: it is
 * counted again. */
CREATE TABLE pqrun.live_counts (
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	blocked         bigint      NOT NULL,
	ready           bigint      NOT NULL,
	delayed         bigint      NOT NULL,
	running         bigint      NOT NULL,
	oldest_ready_at timestamptz,
	PRIMARY KEY (queue, job_type)
);
/* When that count was taken and how long it took: one row. */
CREATE TABLE pqrun.live_count_round (
	counted_at timestamptz NOT NULL,
	took       interval    NOT NULL,
	only_row   boolean     NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row)
);
REVOKE ALL ON pqrun.live_counts, pqrun.live_count_round FROM PUBLIC;

/* Counts the unfinished jobs into pqrun.live_counts in one pass over
 * job_live, writing only the rows that changed, and answers how long it
 * took. The maintenance worker calls it (src/bgw/worker.cpp), and so may
 * the extension's owner; counts take turns by the advisory transaction
 * lock (1886483058, 2). */
CREATE FUNCTION pqrun._count_live_jobs()
RETURNS interval
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	started timestamptz := clock_timestamp();
BEGIN
	/* One count at a time: the last to start writes last. */
	PERFORM pg_advisory_xact_lock(1886483058, 2);
	WITH live AS MATERIALIZED (
		SELECT j.queue, j.job_type,
		       count(*) FILTER (WHERE j.status = 'BLOCKED') AS blocked,
		       count(*) FILTER (WHERE j.status = 'READY' AND j.run_after <= started) AS ready,
		       count(*) FILTER (WHERE j.status = 'READY' AND j.run_after > started) AS delayed,
		       count(*) FILTER (WHERE j.status = 'RUNNING') AS running,
		       min(j.run_after) FILTER (WHERE j.status = 'READY' AND j.run_after <= started) AS oldest_ready_at
		  FROM pqrun.job_live j
		 GROUP BY j.queue, j.job_type),
	     counted AS (
		SELECT * FROM live
		UNION ALL
		SELECT c.queue, c.job_type, 0, 0, 0, 0, NULL
		  FROM pqrun._queue_counters() c
		 WHERE NOT EXISTS (SELECT FROM live l WHERE l.queue = c.queue AND l.job_type = c.job_type)),
	     gone AS (
		DELETE FROM pqrun.live_counts o
		 WHERE NOT EXISTS (SELECT FROM counted n WHERE n.queue = o.queue AND n.job_type = o.job_type))
	INSERT INTO pqrun.live_counts AS o
	SELECT * FROM counted
	ON CONFLICT (queue, job_type) DO UPDATE
	   SET blocked = excluded.blocked, ready = excluded.ready, delayed = excluded.delayed,
	       running = excluded.running, oldest_ready_at = excluded.oldest_ready_at
	 WHERE (o.blocked, o.ready, o.delayed, o.running, o.oldest_ready_at)
	       IS DISTINCT FROM (excluded.blocked, excluded.ready, excluded.delayed, excluded.running, excluded.oldest_ready_at);
	INSERT INTO pqrun.live_count_round AS r (counted_at, took) VALUES (started, clock_timestamp() - started)
	ON CONFLICT (only_row) DO UPDATE SET counted_at = excluded.counted_at, took = excluded.took;
	RETURN clock_timestamp() - started;
END $$;
REVOKE ALL ON FUNCTION pqrun._count_live_jobs() FROM PUBLIC;

/* queue_stats from the last count: what a dashboard or a scrape reads,
 * at the cost of the rows it returns. `oldest_ready_age` is as of
 * `counted_at`; done, failed and the last five minutes come from shared
 * memory now. */
CREATE VIEW pqrun.queue_overview AS
	SELECT l.queue, l.job_type, l.blocked, l.ready, l.delayed, l.running,
	       r.counted_at OPERATOR(pg_catalog.-) l.oldest_ready_at AS oldest_ready_age,
	       COALESCE(c.done, 0) AS done, COALESCE(c.failed, 0) AS failed, COALESCE(c.cancelled, 0) AS cancelled,
	       COALESCE(c.done_last_5min, 0) AS done_last_5min, c.errors_last_5min, c.enqueued_last_5min,
	       c.picked_last_5min, c.avg_duration_ms_last_5min, c.avg_wait_ms_last_5min, r.counted_at
	  FROM pqrun.live_counts l
	  LEFT JOIN pqrun.live_count_round r ON true
	  LEFT JOIN pqrun._queue_counters() c ON c.queue OPERATOR(pg_catalog.=) l.queue
	                                     AND c.job_type OPERATOR(pg_catalog.=) l.job_type;

/* queue_controls without the READY jobs each control holds back: the
 * RUNNING ones are counted (by job_live_running, a set as small as the
 * fleet), the backlog is not, and a condition on the controls' columns
 * reads only the controls it names (by queue_control_key). */
CREATE VIEW pqrun.flow_controls AS
	WITH running AS (
		SELECT j.queue, j.job_type, j.concurrency_key, pg_catalog.count(*) AS running
		  FROM pqrun.job_live j
		 WHERE j.status OPERATOR(pg_catalog.=) 'RUNNING'
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT c.queue, c.job_type, c.concurrency_key, c.paused, c.max_running,
	       (SELECT COALESCE(pg_catalog.sum(l.running), 0)::bigint FROM running l
	         WHERE l.queue OPERATOR(pg_catalog.=) c.queue
	           AND (c.job_type IS NULL OR l.job_type OPERATOR(pg_catalog.=) c.job_type)
	           AND (c.concurrency_key IS NULL OR l.concurrency_key OPERATOR(pg_catalog.=) c.concurrency_key)) AS running,
	       c.rate, c.burst,
	       CASE WHEN c.rate IS NOT NULL
	            THEN LEAST(c.burst, COALESCE(f.tokens OPERATOR(pg_catalog.+)
	                                         (c.rate OPERATOR(pg_catalog.*)
	                                          pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()
	                                                               OPERATOR(pg_catalog.-) f.refilled_at)),
	                                         c.burst)) END AS tokens,
	       c.max_running_per_key,
	       CASE WHEN c.job_type IS NULL AND c.concurrency_key IS NULL THEN
	           (SELECT COALESCE(pg_catalog.max(k.running), 0)::bigint
	              FROM (SELECT pg_catalog.sum(b.running) AS running FROM running b
	                     WHERE b.queue OPERATOR(pg_catalog.=) c.queue AND b.concurrency_key IS NOT NULL
	                     GROUP BY b.concurrency_key) k) END AS busiest_key_running,
	       c.rate_per_key, c.burst_per_key,
	       CASE WHEN c.rate_per_key IS NOT NULL THEN COALESCE(b.keys_without_token, 0) END AS rate_limited_keys,
	       c.keyed, c.updated_at
	  FROM pqrun.queue_control c
	  LEFT JOIN pqrun._flow_counters() f ON f.control_id OPERATOR(pg_catalog.=) c.id
	  LEFT JOIN pqrun._key_buckets() b ON b.control_id OPERATOR(pg_catalog.=) c.id;
/* Each control with what it holds back now: flow_controls and the READY
 * jobs it covers, counted from pqrun.job_live in one pass. */
CREATE OR REPLACE VIEW pqrun.queue_controls AS
	WITH ready AS MATERIALIZED (
		SELECT j.queue, j.job_type, j.concurrency_key, pg_catalog.count(*) AS ready
		  FROM pqrun.job_live j
		 WHERE j.status OPERATOR(pg_catalog.=) 'READY'
		   AND j.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT queue FROM pqrun.queue_control))
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT f.queue, f.job_type, f.paused, f.max_running, f.running,
	       (SELECT COALESCE(pg_catalog.sum(r.ready), 0)::bigint FROM ready r
	         WHERE r.queue OPERATOR(pg_catalog.=) f.queue
	           AND (f.job_type IS NULL OR r.job_type OPERATOR(pg_catalog.=) f.job_type)
	           AND (f.concurrency_key IS NULL OR r.concurrency_key OPERATOR(pg_catalog.=) f.concurrency_key)) AS ready,
	       f.rate, f.burst, f.tokens, f.updated_at, f.concurrency_key, f.max_running_per_key, f.keyed,
	       f.busiest_key_running, f.rate_per_key, f.burst_per_key, f.rate_limited_keys
	  FROM pqrun.flow_controls f;
REVOKE ALL ON pqrun.queue_overview, pqrun.flow_controls FROM PUBLIC;

/* The unfinished jobs waiting for job `job_id` (its pending dependency
 * edges, by their primary key), in id order, at most max_rows (NULL: 100;
 * 1,000 at most). */
CREATE FUNCTION pqrun.job_dependents(job_id bigint, max_rows int DEFAULT 100)
RETURNS TABLE (id bigint, queue text, job_type text, status pqrun.job_status)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
	SELECT j.id, j.queue, j.job_type, j.status
	  FROM pqrun.job_dep d JOIN pqrun.job_live j ON j.id = d.job_id
	 WHERE d.dep_id = $1
	 ORDER BY d.job_id
	 LIMIT LEAST(GREATEST(COALESCE($2, 100), 0), 1000)
$$;
REVOKE ALL ON FUNCTION pqrun.job_dependents(bigint, int) FROM PUBLIC;

/* What pqrun's roles may use, in one list (0.21.0): each relation
 * (SELECT), function and procedure (EXECUTE) of the API with the roles that
 * grant_producer, grant_worker, grant_monitor and grant_operator give it
 * to, and whether distribute() has Citus run a call of it on the node of
 * its queue. A function added to the API is granted and delegated by its
 * row here. */
CREATE FUNCTION pqrun._api(OUT object text, OUT kind "char", OUT roles text[], OUT delegated boolean)
RETURNS SETOF record LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ VALUES
	('pqrun.jobs', 'r'::"char", '{producer,worker,monitor,operator}'::text[], false),
	/* await_jobs cannot be SECURITY DEFINER (it commits): it reads job_live
	 * and the flow controls as its caller. */
	('pqrun.job_live', 'r', '{worker}', false),
	('pqrun.queue_control', 'r', '{worker}', false),
	('pqrun.job_attempts', 'r', '{monitor,operator}', false),
	('pqrun.queue_stats', 'r', '{monitor,operator}', false),
	('pqrun.queue_controls', 'r', '{monitor,operator}', false),
	('pqrun.queue_overview', 'r', '{monitor,operator}', false),
	('pqrun.flow_controls', 'r', '{monitor,operator}', false),
	('pqrun.workers', 'r', '{monitor,operator}', false),
	('pqrun.health', 'r', '{monitor,operator}', false),
	('pqrun.periodic', 'r', '{monitor,operator}', false),
	('pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)', 'f',
	 '{producer,worker}', true),
	('pqrun.enqueue_batch(jsonb)', 'f', '{producer,worker}', false),
	('pqrun.cancel(bigint, text, text)', 'f', '{producer,operator}', true),
	('pqrun.pickup(text, text[], text[], int, interval)', 'f', '{worker}', false),
	('pqrun.pickup_from(text, text, int, interval, text[])', 'f', '{worker}', true),
	('pqrun.mark_done(bigint, jsonb, uuid, text)', 'f', '{worker}', true),
	('pqrun.mark_done_batch(bigint[], uuid[], text)', 'f', '{worker}', true),
	('pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int)', 'f', '{worker}', false),
	('pqrun.mark_error(bigint, text, boolean, uuid, interval, text)', 'f', '{worker}', true),
	('pqrun.heartbeat(bigint, uuid, jsonb, interval, text)', 'f', '{worker}', true),
	('pqrun.release(bigint, uuid, text)', 'f', '{worker}', true),
	('pqrun.snooze(bigint, interval, uuid, text)', 'f', '{worker}', true),
	('pqrun.queue_node(text)', 'f', '{worker}', false),
	('pqrun.await_jobs(text[], text[], interval, boolean)', 'p', '{worker}', false),
	('pqrun.metrics()', 'f', '{monitor,operator}', false),
	('pqrun.job_dependents(bigint, int)', 'f', '{monitor,operator}', false),
	/* Functions in a view run with the privileges of whoever reads it. */
	('pqrun._queue_counters()', 'f', '{monitor,operator}', false),
	('pqrun._flow_counters()', 'f', '{monitor,operator}', false),
	('pqrun._key_buckets()', 'f', '{monitor,operator}', false),
	('pqrun._shared_counters()', 'f', '{monitor,operator}', false),
	('pqrun._label(text)', 'f', '{monitor,operator}', false),
	('pqrun.retry(bigint, text)', 'f', '{operator}', true),
	('pqrun.pause_queue(text)', 'f', '{operator}', true),
	('pqrun.resume_queue(text)', 'f', '{operator}', true),
	('pqrun.set_concurrency_limit(text, int, text)', 'f', '{operator}', true),
	('pqrun.set_rate_limit(text, double precision, int, text)', 'f', '{operator}', true),
	('pqrun.set_key_limit(text, int, text)', 'f', '{operator}', true),
	('pqrun.set_key_rate_limit(text, double precision, int, text)', 'f', '{operator}', true),
	/* The bulk actions run as their caller (they commit): the helpers they call. */
	('pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint)', 'p',
	 '{operator}', false),
	('pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint)', 'p',
	 '{operator}', false),
	('pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int)',
	 'f', '{operator}', false),
	('pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int)', 'f', '{operator}', false),
	('pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean)', 'f', '{}', true)
$$;
REVOKE ALL ON FUNCTION pqrun._api() FROM PUBLIC;

/* _grant gives `role` schema pqrun and what pqrun._api() lists for `as`. */
CREATE FUNCTION pqrun._grant(role regrole, "as" text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	a record;
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	FOR a IN SELECT * FROM pqrun._api() WHERE "as" = ANY (roles) ORDER BY object LOOP
		EXECUTE format(CASE a.kind WHEN 'r' THEN 'GRANT SELECT ON %s TO %s'
		                           WHEN 'p' THEN 'GRANT EXECUTE ON PROCEDURE %s TO %s'
		                           ELSE 'GRANT EXECUTE ON FUNCTION %s TO %s' END, a.object, role);
	END LOOP;
END $$;
REVOKE ALL ON FUNCTION pqrun._grant(regrole, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pqrun.grant_producer(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'producer');
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_worker(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'worker');
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_monitor(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'monitor');
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_operator(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'operator');
END $$;

/* The roles made monitors (or operators) before 0.21.0 may read what it
 * adds for them too. */
DO $$
DECLARE
	r regrole;
BEGIN
	FOR r IN SELECT DISTINCT (a).grantee::regrole
	           FROM (SELECT pg_catalog.aclexplode(c.relacl) AS a FROM pg_catalog.pg_class c
	                  WHERE c.oid OPERATOR(pg_catalog.=) 'pqrun.queue_stats'::regclass) acl
	          WHERE (a).privilege_type OPERATOR(pg_catalog.=) 'SELECT'
	            AND (a).grantee OPERATOR(pg_catalog.<>) 0
	            AND (a).grantee OPERATOR(pg_catalog.<>) (a).grantor
	LOOP
		PERFORM pqrun.grant_monitor(r);
	END LOOP;
END $$;

CREATE OR REPLACE FUNCTION pqrun.metrics()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
/* Its plan is large and costed for a backlog it does not read: compiling
 * it took seconds. */
SET jit = off
AS $$
	/* The unfinished jobs as the maintenance worker last counted them
	 * (queue_overview), or counted here (queue_stats) where no count was
	 * taken yet; the flow controls without their READY jobs; each read
	 * once, as is shared memory. */
	WITH qs AS MATERIALIZED (
	       SELECT queue, job_type, blocked, ready OPERATOR(pg_catalog.+) delayed AS ready, running, done, failed,
	              cancelled, oldest_ready_age, done_last_5min, enqueued_last_5min, picked_last_5min,
	              errors_last_5min, counted_at
	         FROM pqrun.queue_overview
	       UNION ALL
	       SELECT queue, job_type, blocked, ready, running, done, failed, cancelled, oldest_ready_age,
	              done_last_5min, enqueued_last_5min, picked_last_5min, errors_last_5min, NULL
	         FROM pqrun.queue_stats WHERE NOT EXISTS (SELECT FROM pqrun.queue_overview)),
	     qc AS MATERIALIZED (SELECT * FROM pqrun.flow_controls),
	     sc AS MATERIALIZED (SELECT * FROM pqrun._shared_counters())
	SELECT pg_catalog.concat_ws(E'\n',
	  '# HELP pqrun_jobs Jobs by queue, job type and status.',
	  '# TYPE pqrun_jobs gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_jobs{queue=%s,job_type=%s,status="%s"} %s',
	           pqrun._label(s.queue), pqrun._label(s.job_type), st.status, st.n), E'\n'
	           ORDER BY s.queue, s.job_type, st.status)
	     FROM qs s,
	          LATERAL (VALUES ('BLOCKED', s.blocked), ('READY', s.ready), ('RUNNING', s.running),
	                          ('DONE', s.done), ('FAILED', s.failed), ('CANCELLED', s.cancelled)) AS st(status, n)),
	  '# HELP pqrun_oldest_ready_age_seconds Age of the oldest runnable job when the jobs were counted.',
	  '# TYPE pqrun_oldest_ready_age_seconds gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_oldest_ready_age_seconds{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type),
	           COALESCE(pg_catalog.date_part('epoch', oldest_ready_age), 0)), E'\n' ORDER BY queue, job_type)
	     FROM qs),
	  '# HELP pqrun_done_last_5min Jobs finished DONE in the last five minutes.',
	  '# TYPE pqrun_done_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_done_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), done_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs),
	  '# HELP pqrun_live_counts_age_seconds Age of the counts of unfinished jobs in pqrun_jobs (0: counted by this scrape).',
	  '# TYPE pqrun_live_counts_age_seconds gauge',
	  (SELECT pg_catalog.format('pqrun_live_counts_age_seconds %s',
	           COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.max(counted_at)), 0))
	     FROM qs),
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
	           pqrun._label(queue), CASE WHEN paused THEN 1 ELSE 0 END), E'\n' ORDER BY queue)
	     FROM qc WHERE job_type IS NULL),
	  '# HELP pqrun_concurrency_limit Most jobs RUNNING at once (pqrun.set_concurrency_limit; job_type "" for the queue).',
	  '# TYPE pqrun_concurrency_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_concurrency_limit{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), max_running), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE max_running IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_concurrency_running Jobs RUNNING under a concurrency limit.',
	  '# TYPE pqrun_concurrency_running gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_concurrency_running{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), running), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE max_running IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_key_limit Most jobs of one concurrency key RUNNING at once (pqrun.set_key_limit; concurrency_key "" for every key without its own).',
	  '# TYPE pqrun_key_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_limit{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN max_running_per_key ELSE max_running END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM qc
	    WHERE (concurrency_key IS NOT NULL AND max_running IS NOT NULL) OR max_running_per_key IS NOT NULL),
	  '# HELP pqrun_key_running Jobs RUNNING of the concurrency key (concurrency_key "": of the busiest key without a limit of its own).',
	  '# TYPE pqrun_key_running gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_running{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN busiest_key_running ELSE running END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM qc
	    WHERE (concurrency_key IS NOT NULL AND max_running IS NOT NULL) OR max_running_per_key IS NOT NULL),
	  '# HELP pqrun_rate_limit Most claims per second (pqrun.set_rate_limit; job_type "" for the queue).',
	  '# TYPE pqrun_rate_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rate_limit{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), rate), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE rate IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_rate_tokens Claims a rate limit allows at once now.',
	  '# TYPE pqrun_rate_tokens gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rate_tokens{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), tokens), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE rate IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_key_rate_limit Most claims per second of one concurrency key (pqrun.set_key_rate_limit; concurrency_key "" for every key without its own).',
	  '# TYPE pqrun_key_rate_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_limit{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN rate_per_key ELSE rate END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM qc
	    WHERE (concurrency_key IS NOT NULL AND rate IS NOT NULL) OR rate_per_key IS NOT NULL),
	  '# HELP pqrun_key_rate_tokens Claims a key''s own rate limit allows at once now.',
	  '# TYPE pqrun_key_rate_tokens gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_tokens{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(concurrency_key), tokens), E'\n'
	           ORDER BY queue, concurrency_key)
	     FROM qc WHERE rate IS NOT NULL AND concurrency_key IS NOT NULL),
	  '# HELP pqrun_key_rate_limited Keys of the queue without a token in their bucket now (pqrun.set_key_rate_limit).',
	  '# TYPE pqrun_key_rate_limited gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_limited{queue=%s} %s',
	           pqrun._label(queue), rate_limited_keys), E'\n' ORDER BY queue)
	     FROM qc WHERE rate_per_key IS NOT NULL),
	  '# HELP pqrun_enqueued_last_5min Jobs enqueued in the last five minutes.',
	  '# TYPE pqrun_enqueued_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_enqueued_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), enqueued_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs WHERE enqueued_last_5min IS NOT NULL),
	  '# HELP pqrun_picked_last_5min Jobs claimed in the last five minutes.',
	  '# TYPE pqrun_picked_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_picked_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), picked_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs WHERE picked_last_5min IS NOT NULL),
	  '# HELP pqrun_errors_last_5min Attempts that ended in an error in the last five minutes, retried or not.',
	  '# TYPE pqrun_errors_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_errors_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), errors_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs WHERE errors_last_5min IS NOT NULL),
	  '# HELP pqrun_rescued_total RUNNING jobs maintenance put back since the database''s worker slot was taken: stale (their stale window passed) or orphaned (their holder''s session ended).',
	  '# TYPE pqrun_rescued_total counter',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rescued_total{reason="%s"} %s', label, value), E'\n' ORDER BY label)
	     FROM sc WHERE metric = 'rescued_total'),
	  '# HELP pqrun_shared_memory_entries Entries taken in a fixed-size table of pqrun''s shared memory.',
	  '# TYPE pqrun_shared_memory_entries gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_shared_memory_entries{table="%s"} %s', label, value), E'\n' ORDER BY label)
	     FROM sc WHERE metric = 'shared_memory_entries'),
	  '# HELP pqrun_shared_memory_capacity Entries a fixed-size table of pqrun''s shared memory holds.',
	  '# TYPE pqrun_shared_memory_capacity gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_shared_memory_capacity{table="%s"} %s', label, value), E'\n' ORDER BY label)
	     FROM sc WHERE metric = 'shared_memory_capacity')) || E'\n'
$$;

CREATE OR REPLACE FUNCTION pqrun.distribute(shard_count int DEFAULT 32)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	holding text;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RAISE EXCEPTION 'Citus is not installed in this database' USING ERRCODE = '0A000';
	END IF;
	IF shard_count IS NULL OR shard_count OPERATOR(pg_catalog.<) 1 OR shard_count OPERATOR(pg_catalog.>) 64000 THEN
		RAISE EXCEPTION 'shard_count must be between 1 and 64000' USING ERRCODE = '22023';
	END IF;
	IF NOT pg_catalog.citus_is_coordinator() THEN
		RAISE EXCEPTION 'pqrun.distribute() runs on the coordinator' USING ERRCODE = '0A000';
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
	            WHERE logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass) THEN
		RAISE NOTICE 'pqrun''s tables are distributed already';
	ELSE
		/* A worker's own tables become the shells of the distributed ones:
		 * their jobs would be hidden. */
		SELECT pg_catalog.string_agg(r.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) r.nodeport, ', ')
		  INTO holding
		  FROM pg_catalog.run_command_on_workers(
		           'SELECT (SELECT pg_catalog.count(*) FROM (SELECT FROM pqrun.job_live LIMIT 1) l)'
		           ' OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM (SELECT FROM pqrun.job_done LIMIT 1) d)') r
		 WHERE NOT r.success OR r.result OPERATOR(pg_catalog.<>) '0';
		IF holding IS NOT NULL THEN
			RAISE EXCEPTION 'worker nodes hold jobs of their own: %', holding USING ERRCODE = '55000',
				HINT = 'Finish or purge them first: distributed, pqrun''s tables on a worker are shells whose rows are not read.';
		END IF;
		/* Schedules and queue controls are kept on the node of their queue;
		 * the coordinator's own would apply nowhere. */
		IF EXISTS (SELECT FROM pqrun.periodic) OR EXISTS (SELECT FROM pqrun.queue_control) THEN
			RAISE EXCEPTION 'the coordinator has schedules or queue controls' USING ERRCODE = '55000',
				HINT = 'Remove them, and make them again through the coordinator once the tables are distributed.';
		END IF;
		/* Ids unique across the cluster: Citus leaves an extension's sequence
		 * alone on the workers, so each node's counts from its group id << 48,
		 * as Citus's own sequences on workers do. */
		PERFORM pg_catalog.run_command_on_all_nodes(
			'SELECT pg_catalog.setval(''pqrun.job_id_seq'', GREATEST((SELECT last_value FROM pqrun.job_id_seq),'
			' ((SELECT groupid FROM pg_catalog.pg_dist_local_group)::bigint OPERATOR(pg_catalog.<<) 48)'
			' OPERATOR(pg_catalog.+) 1))');
		ALTER TABLE pqrun.job_live DROP CONSTRAINT job_live_pkey, ADD CONSTRAINT job_live_pkey PRIMARY KEY (id, queue);
		DROP INDEX pqrun.job_live_dedupe;
		CREATE UNIQUE INDEX job_live_dedupe ON pqrun.job_live (dedupe_key, queue) WHERE dedupe_key IS NOT NULL;
		PERFORM pg_catalog.create_distributed_table('pqrun.job_live', 'queue', shard_count => shard_count);
		PERFORM pg_catalog.create_distributed_table('pqrun.job_done', 'queue', colocate_with => 'pqrun.job_live');
	END IF;
	/* The lanes of filtered pickups (0.16.0) of an install distributed
	 * before: its update left them to this call, since an index made in an
	 * extension's script does not reach the shards. */
	IF pg_catalog.to_regclass('pqrun.job_live_pick_type') IS NULL THEN
		CREATE INDEX job_live_pick_type ON pqrun.job_live (job_type, (-(priority::bigint)), id)
			WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
	END IF;
	IF pg_catalog.to_regclass('pqrun.job_live_pick_queue') IS NULL THEN
		CREATE INDEX job_live_pick_queue ON pqrun.job_live (queue, job_type, (-(priority::bigint)), id)
			WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
	END IF;
	/* The delegated calls, again on a second call: ALTER EXTENSION pqrun
	 * UPDATE may have made some of them anew. */
	PERFORM pg_catalog.create_distributed_function(a.object::pg_catalog.regprocedure, 'queue',
	                                               colocate_with => 'pqrun.job_live')
	   FROM pqrun._api() a WHERE a.delegated;
END $$;

/* A partition that begins by now is attached under ACCESS EXCLUSIVE on
 * job_done (pqrun.sql, _history_round). */
CREATE OR REPLACE FUNCTION pqrun._history_round(round_at timestamptz, step interval, ahead int,
                                     drop_before timestamptz, keep_failed_from timestamptz)
RETURNS TABLE (queue text, job_type text, status text, jobs bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET lock_timeout = '100ms'
AS $$
DECLARE
	seconds float8 := extract(epoch FROM step);
	cols text;
	s timestamptz;
	e timestamptz;
	covered timestamptz;
	whole timestamptz;
	last timestamptz;
	locked boolean;
	made text;
	dropped record;
	counted jsonb;
	waited boolean := false;
	/* The round holds a lock of job_done: from then on it never waits. */
	held boolean := false;
BEGIN
	SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
	  FROM pg_attribute WHERE attrelid = 'pqrun.job_done'::regclass AND attnum > 0 AND NOT attisdropped;
	/* None before the first job: a restore makes job_done's partitions (as
	 * pg_dump saw them) after CREATE EXTENSION and before it copies any
	 * job, and ours would take their names and times. Read under a lock
	 * that holds off another round's ATTACH, given back with the block:
	 * its subtransaction is rolled back on purpose. */
	IF NOT EXISTS (SELECT FROM pqrun._history_partitions()) THEN
		BEGIN
			LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE;
			IF NOT EXISTS (SELECT FROM pqrun.job_done_default) AND NOT EXISTS (SELECT FROM pqrun.job_live) THEN
				ahead := -1;
			END IF;
			RAISE EXCEPTION USING ERRCODE = 'PQ000';
		EXCEPTION
			WHEN lock_not_available THEN RETURN;
			WHEN SQLSTATE 'PQ000' THEN NULL;
		END;
	END IF;

	FOR k IN 0..ahead LOOP
		EXIT WHEN waited;
		BEGIN
			locked := false;
			LOOP
				s := to_timestamp(floor(extract(epoch FROM round_at) / seconds) * seconds) + k * step;
				e := s + step;
				/* Past the partitions that cover s, short of the next one. */
				LOOP
					covered := (SELECT max(p.hi) FROM pqrun._history_partitions() AS p WHERE p.lo <= s AND p.hi > s);
					EXIT WHEN covered IS NULL;
					s := covered;
				END LOOP;
				whole := e;
				e := LEAST(e, (SELECT min(p.lo) FROM pqrun._history_partitions() AS p WHERE p.lo > s));
				/* Past what job_done_default holds of it; none in a gap
				 * before a partition, which only such rows leave. */
				last := (SELECT max(d.finished_at) FROM pqrun.job_done_default AS d WHERE d.finished_at >= s AND d.finished_at < e);
				IF last IS NOT NULL THEN
					s := CASE WHEN e < whole THEN e ELSE last + interval '1 microsecond' END;
				END IF;
				EXIT WHEN s >= e OR locked;
				/* Then again under a lock that holds off other rounds (which
				 * may have made it meanwhile) and every finish: one routed
				 * before the ATTACH to the default partition would meet its
				 * new constraint after it (23514). Held until the round
				 * commits. */
				EXECUTE format('LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE%s',
				               CASE WHEN held THEN ' NOWAIT' ELSE '' END);
				locked := true;
			END LOOP;
			CONTINUE WHEN s >= e;
			/* A partition that begins by now takes finishes as soon as it
			 * is attached: a query planned meanwhile without it, whose
			 * snapshot is taken after its plan (SPI's, in pqrun's
			 * functions), would miss the jobs finished there (0.21.0:
			 * "job does not exist" for a job just finished). Attached
			 * under ACCESS EXCLUSIVE, it is in every plan made after the
			 * round commits; one made ahead of its time is empty until
			 * long after. */
			IF s <= round_at THEN
				LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE NOWAIT;
			END IF;
			/* ATTACH also locks the default partition, whose constraint
			 * changes. */
			LOCK TABLE pqrun.job_done_default IN ACCESS EXCLUSIVE MODE NOWAIT;
			made := 'job_done_' || to_char(s, 'YYYYMMDD_HH24MISS')
			        || CASE WHEN date_trunc('second', s) <> s THEN to_char(s, '_US') ELSE '' END;
			EXECUTE format('CREATE TABLE pqrun.%I (LIKE pqrun.job_done INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (id)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (finished_at) WHERE status = ''FAILED''', made);
			EXECUTE format('ALTER TABLE pqrun.job_done ATTACH PARTITION pqrun.%I FOR VALUES FROM (%L) TO (%L)', made, s, e);
			held := true;
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition pqrun.% of pqrun.job_done not made: %', made, SQLERRM;
		END;
	END LOOP;

	FOR dropped IN SELECT p.part FROM pqrun._history_partitions() AS p WHERE p.hi <= drop_before LOOP
		EXIT WHEN waited;
		BEGIN
			/* No purge or retry may change what is counted before it goes
			 * (finishes do not write to a partition that ended). */
			EXECUTE format('LOCK TABLE %s IN SHARE MODE%s', dropped.part, CASE WHEN held THEN ' NOWAIT' ELSE '' END);
			EXECUTE format('SELECT jsonb_agg(g) FROM (SELECT queue, job_type, status::text AS status, count(*) AS jobs'
			               '  FROM %s WHERE status <> ''FAILED'' OR $1 IS NULL OR finished_at < $1 GROUP BY 1, 2, 3) AS g',
			               dropped.part) INTO counted USING keep_failed_from;
			EXECUTE format('DELETE FROM pqrun.attempt_log a USING %s d WHERE a.job_id = d.id'
			               '   AND (d.status <> ''FAILED'' OR $1 IS NULL OR d.finished_at < $1)', dropped.part) USING keep_failed_from;
			/* The one moment finishes wait: from here to the round's commit,
			 * with the FAILED jobs kept being copied. DETACH also locks the
			 * partition and the default partition. */
			EXECUTE format('LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE%s', CASE WHEN held THEN ' NOWAIT' ELSE '' END);
			EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', dropped.part);
			LOCK TABLE pqrun.job_done_default IN ACCESS EXCLUSIVE MODE NOWAIT;
			EXECUTE format('ALTER TABLE pqrun.job_done DETACH PARTITION %s', dropped.part);
			IF keep_failed_from IS NOT NULL THEN
				EXECUTE format('INSERT INTO pqrun.job_done_default (%s) SELECT %s FROM %s'
				               ' WHERE status = ''FAILED'' AND finished_at >= $1', cols, cols, dropped.part) USING keep_failed_from;
			END IF;
			EXECUTE format('DROP TABLE %s', dropped.part);
			held := true;
			RETURN QUERY SELECT g.queue, g.job_type, g.status, g.jobs
			               FROM jsonb_to_recordset(coalesce(counted, '[]')) AS g(queue text, job_type text, status text, jobs bigint);
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			/* Another round dropped it first. */
			WHEN undefined_table OR invalid_table_definition THEN NULL;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition % of pqrun.job_done not dropped: %', dropped.part, SQLERRM;
		END;
	END LOOP;
END $$;
