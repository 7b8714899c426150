CREATE FUNCTION pqrun.metrics()
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
