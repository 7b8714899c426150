/* sql/pqrun--0.19.0--0.20.0.sql — ALTER EXTENSION pqrun UPDATE from 0.19.0.
 *
 * 0.20.0 adds bulk retry and cancel by filter (procedures that commit
 * batch by batch), an operator role for dashboards and on-call engineers,
 * and metrics of recent activity, rescues and shared memory.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.20.0'" to load this file. \quit

/* A label value quoted as the Prometheus text format wants it: only
 * backslash, double quote and line feed escaped (to_json's JSON escapes,
 * \t or \u0001, are not the format's: promtool refuses the whole text). */
CREATE FUNCTION pqrun._label(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '"' OPERATOR(pg_catalog.||)
       pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(value, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
       OPERATOR(pg_catalog.||) '"';
REVOKE ALL ON FUNCTION pqrun._label(text) FROM PUBLIC;

/* What only shared memory knows: rescues and how full its tables are. */
CREATE FUNCTION pqrun._shared_counters(OUT metric text, OUT label text, OUT value bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_shared_counters' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun._shared_counters() FROM PUBLIC;

CREATE OR REPLACE FUNCTION pqrun.metrics()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	/* queue_stats and queue_controls count unfinished jobs: each is read
	 * once, as is shared memory. */
	WITH qs AS MATERIALIZED (SELECT * FROM pqrun.queue_stats),
	     qc AS MATERIALIZED (SELECT * FROM pqrun.queue_controls),
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
	  '# HELP pqrun_oldest_ready_age_seconds Age of the oldest runnable job.',
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
	               ' pqrun._key_buckets(), pqrun._shared_counters(), pqrun._label(text) TO %s', role);
END $$;

/* metrics() runs as its caller: whoever may call it gets what it now reads. */
DO $$
DECLARE
	r regrole;
BEGIN
	FOR r IN SELECT a.grantee::regrole
	           FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
	          WHERE p.oid OPERATOR(pg_catalog.=) 'pqrun.metrics()'::pg_catalog.regprocedure
	            AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	            AND a.grantee OPERATOR(pg_catalog.<>) 0
	            AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION pqrun._shared_counters(), pqrun._label(text) TO %s', r);
	END LOOP;
END $$;

/* ---- Acting on many jobs ------------------------------------------------ */

/* The next `n` jobs after id `after_id` that match a filter (NULL: any),
 * finished ones from pqrun.job_done or unfinished ones from job_live, in
 * id order: retry_jobs and cancel_jobs walk them batch by batch. */
CREATE FUNCTION pqrun._jobs_matching(
	finished boolean, queue text, job_type text, statuses pqrun.job_status[],
	after_time timestamptz, before_time timestamptz, error_contains text, payload_contains jsonb,
	after_id bigint, n int)
RETURNS TABLE (job_id bigint, job_queue text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF finished THEN
		RETURN QUERY
		SELECT d.id, d.queue FROM pqrun.job_done d
		 WHERE d.status = ANY (statuses) AND d.id > after_id
		   AND (_jobs_matching.queue IS NULL OR d.queue = _jobs_matching.queue)
		   AND (_jobs_matching.job_type IS NULL OR d.job_type = _jobs_matching.job_type)
		   AND (after_time IS NULL OR d.finished_at >= after_time)
		   AND (before_time IS NULL OR d.finished_at < before_time)
		   AND (error_contains IS NULL OR strpos(lower(d.last_error), lower(error_contains)) > 0)
		   AND (payload_contains IS NULL OR d.payload @> payload_contains)
		 ORDER BY d.id LIMIT n;
	ELSE
		RETURN QUERY
		SELECT l.id, l.queue FROM pqrun.job_live l
		 WHERE l.status = ANY (statuses) AND l.id > after_id
		   AND (_jobs_matching.queue IS NULL OR l.queue = _jobs_matching.queue)
		   AND (_jobs_matching.job_type IS NULL OR l.job_type = _jobs_matching.job_type)
		   AND (after_time IS NULL OR l.created_at >= after_time)
		   AND (before_time IS NULL OR l.created_at < before_time)
		   AND (error_contains IS NULL OR strpos(lower(l.last_error), lower(error_contains)) > 0)
		   AND (payload_contains IS NULL OR l.payload @> payload_contains)
		 ORDER BY l.id LIMIT n;
	END IF;
END $$;

/* The arguments every bulk action checks alike (22023). */
CREATE FUNCTION pqrun._check_bulk(statuses pqrun.job_status[], allowed pqrun.job_status[], batch_size int)
RETURNS void LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF statuses IS NULL OR cardinality(statuses) = 0 OR NOT statuses <@ allowed OR array_position(statuses, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'statuses must be among %', allowed USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF batch_size IS NULL OR batch_size < 1 OR batch_size > 10000 THEN
		RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
END $$;

/* Bulk retry and cancel by filter, batch_size jobs per transaction: a
 * million-row action never holds one long transaction or its locks. They
 * commit, so they are procedures (not SECURITY DEFINER, which would forbid
 * COMMIT): they act as their caller, through pqrun.retry and pqrun.cancel,
 * and name every operator and function by its schema. */
CREATE PROCEDURE pqrun.retry_jobs(
	queue            text               DEFAULT NULL,
	job_type         text               DEFAULT NULL,
	statuses         pqrun.job_status[] DEFAULT '{FAILED,CANCELLED}',
	finished_after   timestamptz        DEFAULT NULL,
	finished_before  timestamptz        DEFAULT NULL,
	error_contains   text               DEFAULT NULL,
	payload_contains jsonb              DEFAULT NULL,
	batch_size       int                DEFAULT 1000,
	INOUT retried    bigint             DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	after_id bigint := -9223372036854775808;
	job record;
	last_id bigint;
BEGIN
	PERFORM pqrun._check_bulk(statuses, '{FAILED,CANCELLED}', batch_size);
	retried := 0;
	LOOP
		last_id := NULL;
		FOR job IN SELECT m.job_id AS id, m.job_queue AS queue FROM pqrun._jobs_matching(true, queue, job_type, statuses,
		               finished_after, finished_before, error_contains, payload_contains, after_id, batch_size) m LOOP
			BEGIN
				IF pqrun.retry(job.id, job.queue) THEN
					retried := retried OPERATOR(pg_catalog.+) 1;
				END IF;
			EXCEPTION WHEN unique_violation THEN
				/* Another unfinished job holds its dedupe_key: it stays. */
				NULL;
			END;
			last_id := job.id;
		END LOOP;
		EXIT WHEN last_id IS NULL;
		after_id := last_id;
		COMMIT;
	END LOOP;
END $$;

CREATE PROCEDURE pqrun.cancel_jobs(
	queue            text               DEFAULT NULL,
	job_type         text               DEFAULT NULL,
	statuses         pqrun.job_status[] DEFAULT '{READY,BLOCKED}',
	created_after    timestamptz        DEFAULT NULL,
	created_before   timestamptz        DEFAULT NULL,
	error_contains   text               DEFAULT NULL,
	payload_contains jsonb              DEFAULT NULL,
	reason           text               DEFAULT NULL,
	batch_size       int                DEFAULT 1000,
	INOUT cancelled  bigint             DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	after_id bigint := -9223372036854775808;
	job record;
	last_id bigint;
BEGIN
	PERFORM pqrun._check_bulk(statuses, '{READY,BLOCKED,RUNNING}', batch_size);
	cancelled := 0;
	LOOP
		last_id := NULL;
		FOR job IN SELECT m.job_id AS id, m.job_queue AS queue FROM pqrun._jobs_matching(false, queue, job_type, statuses,
		               created_after, created_before, error_contains, payload_contains, after_id, batch_size) m LOOP
			IF pqrun.cancel(job.id, reason, job.queue) THEN
				cancelled := cancelled OPERATOR(pg_catalog.+) 1;
			END IF;
			last_id := job.id;
		END LOOP;
		EXIT WHEN last_id IS NULL;
		after_id := last_id;
		COMMIT;
	END LOOP;
END $$;

REVOKE ALL ON FUNCTION pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int),
	pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int) FROM PUBLIC;
REVOKE ALL ON PROCEDURE pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint),
	pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint) FROM PUBLIC;

/* An operator (a dashboard, an on-call engineer) sees what a monitor sees
 * and may retry, cancel, pause and resume queues and set their limits; it
 * enqueues and claims nothing. */
CREATE FUNCTION pqrun.grant_operator(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun.grant_monitor(role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.retry(bigint, text), pqrun.cancel(bigint, text, text),'
	               ' pqrun.pause_queue(text), pqrun.resume_queue(text),'
	               ' pqrun.set_concurrency_limit(text, int, text), pqrun.set_rate_limit(text, double precision, int, text),'
	               ' pqrun.set_key_limit(text, int, text), pqrun.set_key_rate_limit(text, double precision, int, text),'
	               ' pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int),'
	               ' pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int) TO %s', role);
	EXECUTE format('GRANT EXECUTE ON PROCEDURE'
	               ' pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint),'
	               ' pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint) TO %s', role);
END $$;
REVOKE ALL ON FUNCTION pqrun.grant_operator(regrole) FROM PUBLIC;
