-- metrics: what pqrun.metrics() reports, in Prometheus text: the families
-- (HELP and TYPE lines), a queue's lines, rescues counted at commit, and
-- how full shared memory's tables are.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- Every family, in order.
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') AS line WHERE line LIKE '# TYPE %';

-- A queue's activity of the last five minutes.
SELECT count(pqrun.enqueue('m', queue => 'metrics-q')) FROM generate_series(1, 3);
SELECT count(pqrun.mark_error(id, 'boom')) FROM pqrun.pickup('mw', queues => '{metrics-q}', batch_size => 2);
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') AS line
 WHERE line ~ '^pqrun_(enqueued|picked|errors)_last_5min\{queue="metrics-q"' ORDER BY 1;

-- A stale job put back counts once, at the commit of the round that put it
-- back (the change of locked_at and the reap in one transaction, so the
-- workers' rounds cannot reap it first); a rolled-back round counts none.
SELECT value AS stale_before FROM pqrun._shared_counters() WHERE metric = 'rescued_total' AND label = 'stale' \gset
SELECT count(*) AS claimed FROM pqrun.pickup('mw', queues => '{metrics-q}');
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '1 day' WHERE queue = 'metrics-q' AND status = 'RUNNING';
SELECT pqrun.reap_stale() AS reaped;
ROLLBACK;
SELECT value - :stale_before AS counted FROM pqrun._shared_counters() WHERE metric = 'rescued_total' AND label = 'stale';
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '1 day' WHERE queue = 'metrics-q' AND status = 'RUNNING';
SELECT pqrun.reap_stale() AS reaped;
COMMIT;
SELECT value - :stale_before AS counted FROM pqrun._shared_counters() WHERE metric = 'rescued_total' AND label = 'stale';

-- Shared memory's tables: each with its capacity, none full.
SELECT e.label AS shared_table, e.value <= c.value AS within, c.value AS capacity
  FROM pqrun._shared_counters() e JOIN pqrun._shared_counters() c USING (label)
 WHERE e.metric = 'shared_memory_entries' AND c.metric = 'shared_memory_capacity' ORDER BY 1;

-- Label values are quoted as the text format wants: backslash, double
-- quote and line feed escaped, nothing else (a tab stays a tab).
SELECT count(pqrun.enqueue('m', queue => E'odd\t"q"\\x\ny')) AS enqueued;
SELECT replace(line, E'\t', '<tab>') AS line FROM regexp_split_to_table(pqrun.metrics(), E'\n') AS line
 WHERE line LIKE 'pqrun_enqueued_last_5min{queue="odd%';

-- The unfinished jobs as the maintenance worker counts them for
-- queue_overview and metrics() (pqrun._count_live_jobs): READY jobs due
-- and delayed apart, RUNNING and BLOCKED ones, the oldest due job's age
-- as of the count, and a row of zeros for a pair with finished jobs only.
SELECT pqrun.enqueue('a', queue => 'counted', run_after => now() - interval '1 minute') > 0 AS due,
       pqrun.enqueue('a', queue => 'counted') > 0 AS due,
       pqrun.enqueue('a', queue => 'counted', run_after => now() + interval '1 hour') > 0 AS delayed;
SELECT pqrun.enqueue('b', queue => 'counted') AS holding \gset
SELECT pqrun.enqueue('c', queue => 'counted') AS finishing \gset
SELECT count(*) AS claimed FROM pqrun.pickup('cw', queues => '{counted}', job_types => '{b,c}', batch_size => 2);
SELECT pqrun.enqueue('b', queue => 'counted', depends_on => ARRAY[:holding]::bigint[]) AS waiting \gset
SELECT pqrun.mark_done(:finishing);
SELECT pqrun._count_live_jobs() >= '0' AS counted;
SELECT queue, job_type, blocked, ready, delayed, running, oldest_ready_age >= '1 minute' AS waited_a_minute, done, failed
  FROM pqrun.queue_overview WHERE queue = 'counted' ORDER BY job_type;
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') AS line
 WHERE line LIKE 'pqrun_jobs{queue="counted",job_type="a"%' ORDER BY 1;
SELECT line ~ '^pqrun_live_counts_age_seconds [0-9.e-]+$' AS age_reported
  FROM regexp_split_to_table(pqrun.metrics(), E'\n') AS line WHERE line LIKE 'pqrun_live_counts_age_seconds%';
-- Counts as of the count: a job enqueued since shows at the next one (in
-- one transaction, so that no count of the worker's can see it between).
BEGIN;
SELECT pqrun.enqueue('a', queue => 'counted') > 0 AS enqueued;
SELECT ready FROM pqrun.queue_overview WHERE queue = 'counted' AND job_type = 'a';
COMMIT;
SELECT pqrun._count_live_jobs() >= '0' AS counted;
SELECT ready FROM pqrun.queue_overview WHERE queue = 'counted' AND job_type = 'a';

-- What waits for a job.
SELECT id = :waiting AS the_waiting_job, queue, job_type, status FROM pqrun.job_dependents(:holding);
SELECT count(*) AS none FROM pqrun.job_dependents(:holding, 0);

-- flow_controls is queue_controls without the READY jobs counted.
SELECT pqrun.set_concurrency_limit('counted', 5);
SELECT pqrun.set_key_limit('counted-keys', 2);
SELECT count(*) AS differ FROM (
  (SELECT queue, job_type, concurrency_key, paused, max_running, running, rate, burst, max_running_per_key,
          busiest_key_running, rate_per_key, burst_per_key, rate_limited_keys, keyed FROM pqrun.flow_controls
   EXCEPT
   SELECT queue, job_type, concurrency_key, paused, max_running, running, rate, burst, max_running_per_key,
          busiest_key_running, rate_per_key, burst_per_key, rate_limited_keys, keyed FROM pqrun.queue_controls)
  UNION ALL
  (SELECT queue, job_type, concurrency_key, paused, max_running, running, rate, burst, max_running_per_key,
          busiest_key_running, rate_per_key, burst_per_key, rate_limited_keys, keyed FROM pqrun.queue_controls
   EXCEPT
   SELECT queue, job_type, concurrency_key, paused, max_running, running, rate, burst, max_running_per_key,
          busiest_key_running, rate_per_key, burst_per_key, rate_limited_keys, keyed FROM pqrun.flow_controls)) d;
SELECT queue, max_running, running FROM pqrun.flow_controls WHERE queue = 'counted';
