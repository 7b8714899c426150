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
