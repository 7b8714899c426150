-- operate: reap_stale, cancel, retry, purge and run_maintenance.
--
-- Time is simulated by moving timestamps of the internal tables into the
-- past (pqrun.job_live.locked_at/heartbeat_at for staleness,
-- pqrun.job_done.finished_at for age). Each such change is made in the same
-- transaction as the call that observes it, so that the background
-- maintenance worker of a preloaded server cannot act on it first.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- 1. reap_stale
SELECT pqrun.enqueue('plain', max_attempts => 3) AS id;                  -- 1: default window
SELECT pqrun.enqueue('short', timeout_seconds => 60) AS id;              -- 2: 60 s window
SELECT pqrun.enqueue('long', timeout_seconds => 3600) AS id;             -- 3: 1 h window
SELECT pqrun.enqueue('last-try', max_attempts => 1) AS id;               -- 4: no attempts left
SELECT pqrun.enqueue('beating') AS id;                                   -- 5: sends heartbeats
SELECT pqrun.enqueue('after-last-try', depends_on => ARRAY[4]::bigint[]) AS id;  -- 6
SELECT id, attempts FROM pqrun.pickup('w1', batch_size => 10);
SELECT lease_token AS lease1 FROM pqrun.jobs WHERE id = 1 \gset
-- Nothing is stale yet.
SELECT pqrun.reap_stale() AS reaped;
-- Two minutes: only the job with a 60 s timeout is stale under the default window.
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '2 minutes' WHERE status = 'RUNNING';
SELECT pqrun.reap_stale() AS reaped;
SELECT id, status, attempts, run_after = now() AS run_after_now, locked_by,
       lease_token IS NULL AS no_lease, locked_at IS NULL AS not_locked, last_error
  FROM pqrun.jobs WHERE id <= 6 ORDER BY id;
COMMIT;
-- A smaller default window catches the jobs without timeout_seconds, but not
-- job 3, whose own timeout (1 h) wins over the default.
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '2 minutes' WHERE status = 'RUNNING';
-- job 5 proves it is alive: its window starts again at the heartbeat.
SELECT pqrun.heartbeat(5);
SELECT pqrun.reap_stale('1 minute') AS reaped;
SELECT id, status, attempts, last_error, finished_at IS NOT NULL AS finished
  FROM pqrun.jobs WHERE id <= 6 ORDER BY id;
COMMIT;
-- Job 4 had no attempts left: FAILED with outcome 'stale', and its dependent
-- job 6 is CANCELLED.
SELECT job_id, attempt, worker_id, outcome, error FROM pqrun.job_attempts WHERE job_id <= 6 ORDER BY job_id, attempt;
-- The stale window counts from the last heartbeat: 30 minutes after
-- locked_at but 5 minutes after the heartbeat, job 5 is not stale; 25
-- minutes after the heartbeat it is.
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '30 minutes',
       heartbeat_at = now() - interval '5 minutes' WHERE id = 5;
SELECT pqrun.reap_stale() AS reaped;
UPDATE pqrun.job_live SET heartbeat_at = now() - interval '25 minutes' WHERE id = 5;
SELECT pqrun.reap_stale() AS reaped;
SELECT id, status, attempts FROM pqrun.jobs WHERE id = 5;
COMMIT;
-- The reaped worker's lease is dead: 55000 for every mark, nothing changes.
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(1, NULL, :'lease1');
SELECT pqrun.mark_error(1, 'late', false, :'lease1');
SELECT pqrun.heartbeat(1, :'lease1');
\set VERBOSITY default
SELECT id, status, attempts FROM pqrun.jobs WHERE id = 1;
-- A reaped job runs again as its next attempt; the old lease stays refused.
SELECT id, attempts, locked_by FROM pqrun.pickup('w2', job_types => ARRAY['plain']);
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(1, NULL, :'lease1');
\set VERBOSITY default
SELECT pqrun.mark_done(1);
SELECT job_id, attempt, worker_id, outcome FROM pqrun.job_attempts WHERE job_id = 1 ORDER BY attempt;
-- reap_stale('20 minutes') is the default.
BEGIN;
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['beating']);
UPDATE pqrun.job_live SET locked_at = now() - interval '19 minutes', heartbeat_at = NULL WHERE id = 5;
SELECT pqrun.reap_stale() AS reaped;
UPDATE pqrun.job_live SET locked_at = now() - interval '21 minutes' WHERE id = 5;
SELECT pqrun.reap_stale() AS reaped;
COMMIT;

-- 2. cancel: BLOCKED, READY and RUNNING jobs become CANCELLED with the
-- reason in last_error and finished_at set.
SELECT pqrun.enqueue('c-ready') AS id;                                    -- 7
SELECT pqrun.enqueue('c-running') AS id;                                  -- 8
SELECT pqrun.enqueue('c-blocked', depends_on => ARRAY[7]::bigint[]) AS id; -- 9
SELECT pqrun.enqueue('c-delayed', run_after => now() + interval '1 day') AS id;  -- 10
SELECT lease_token AS lease8 FROM pqrun.pickup('w3', job_types => ARRAY['c-running']) \gset
BEGIN;
SELECT pqrun.cancel(9, 'blocked, cancelled') AS cancelled;
SELECT pqrun.cancel(8, 'running, cancelled') AS cancelled;
SELECT pqrun.cancel(10) AS cancelled;
SELECT id, status, last_error, finished_at = now() AS finished_now, attempts
  FROM pqrun.jobs WHERE id BETWEEN 7 AND 10 ORDER BY id;
COMMIT;
SELECT pqrun.cancel(7, 'ready, cancelled') AS cancelled;
SELECT id, status, last_error FROM pqrun.jobs WHERE id = 7;
-- The cancelled running job's worker gets 55000 on its next call.
\set VERBOSITY sqlstate
SELECT pqrun.heartbeat(8, :'lease8');
SELECT pqrun.mark_done(8, '{"late": true}', :'lease8');
SELECT pqrun.mark_error(8, 'late error', false, :'lease8');
SELECT pqrun.mark_done(8);
\set VERBOSITY default
SELECT pqrun.mark_done(8, '{"late": true}', :'lease8');
SELECT id, status, result, last_error FROM pqrun.jobs WHERE id = 8;
SELECT job_id, attempt, worker_id, outcome, error FROM pqrun.job_attempts WHERE job_id BETWEEN 7 AND 10 ORDER BY job_id, attempt;
-- A cancelled job is never picked up.
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['c-ready', 'c-running', 'c-blocked', 'c-delayed']);
-- False for a job that has already finished (DONE, FAILED, CANCELLED),
-- and nothing changes.
SELECT pqrun.cancel(1) AS done_job, pqrun.cancel(4) AS failed_job, pqrun.cancel(7) AS cancelled_job;
SELECT id, status, last_error FROM pqrun.jobs WHERE id IN (1, 4, 7) ORDER BY id;
-- Unknown id: P0002.
\set VERBOSITY sqlstate
SELECT pqrun.cancel(999);
SELECT pqrun.cancel(999, 'why');
\set VERBOSITY default
SELECT pqrun.cancel(999);

-- 3. retry: FAILED and CANCELLED jobs go back to READY, run_after = now(),
-- attempts kept, finished_at cleared.
SELECT pqrun.enqueue('r-failed', max_attempts => 2) AS id;  -- 11
SELECT id FROM pqrun.pickup('w4', job_types => ARRAY['r-failed']);
SELECT pqrun.mark_error(11, 'fatal', terminal => true) AS new_status;
BEGIN;
SELECT pqrun.retry(11) AS retried;
SELECT id, status, attempts, max_attempts, run_after = now() AS run_after_now, finished_at,
       duration_ms, locked_by, lease_token
  FROM pqrun.jobs WHERE id = 11;
COMMIT;
-- It runs again as attempt 2, and its history keeps attempt 1.
SELECT id, attempts, locked_by FROM pqrun.pickup('w5', job_types => ARRAY['r-failed']);
SELECT pqrun.mark_done(11, '"second time lucky"');
SELECT job_id, attempt, worker_id, outcome, error FROM pqrun.job_attempts WHERE job_id = 11 ORDER BY attempt;
-- A job cancelled while RUNNING, one cancelled while READY, and one that
-- failed by running out of attempts (the reaped job 4).
SELECT pqrun.retry(8) AS retried_running_cancel, pqrun.retry(7) AS retried_ready_cancel,
       pqrun.retry(4) AS retried_exhausted;
SELECT id, status, attempts, finished_at FROM pqrun.jobs WHERE id IN (4, 7, 8) ORDER BY id;
-- The dependents a failure cancelled stay CANCELLED.
SELECT id, status FROM pqrun.jobs WHERE id IN (6, 9) ORDER BY id;
-- False for READY, RUNNING, BLOCKED and DONE jobs; nothing changes.
SELECT pqrun.enqueue('r-blocked', depends_on => ARRAY[10]::bigint[]) AS id;  -- 12: doomed, CANCELLED
SELECT pqrun.enqueue('r-dep') AS id;   -- 13
SELECT pqrun.enqueue('r-blocked', depends_on => ARRAY[13]::bigint[]) AS id;  -- 14
SELECT id FROM pqrun.pickup('w6', job_types => ARRAY['c-ready']);  -- 7 is RUNNING now
SELECT pqrun.retry(8) AS ready, pqrun.retry(7) AS running, pqrun.retry(14) AS blocked,
       pqrun.retry(11) AS done;
SELECT id, status, attempts FROM pqrun.jobs WHERE id IN (7, 8, 11, 14) ORDER BY id;
-- Unknown id: P0002.
\set VERBOSITY sqlstate
SELECT pqrun.retry(999);
\set VERBOSITY default
SELECT pqrun.retry(999);
-- Retrying a job whose dedupe key was taken again meanwhile is refused (the
-- key must stay unique among unfinished jobs).
SELECT pqrun.enqueue('r-key', dedupe_key => 'once') AS id;  -- 15
SELECT pqrun.cancel(15) AS cancelled;
SELECT pqrun.enqueue('r-key', dedupe_key => 'once') AS id;  -- 16
\set VERBOSITY sqlstate
SELECT pqrun.retry(15);
\set VERBOSITY default
SELECT pqrun.retry(15);
SELECT id, status FROM pqrun.jobs WHERE dedupe_key = 'once' ORDER BY id;

-- 4. run_maintenance: one round of the workers' job, answering counts.
-- Staged in one transaction: a job stale under pqrun.stale_timeout (20 min),
-- a job whose picking backend is gone (internal holder_pid set to 0, which
-- is never a live backend), a delayed job that is due, and a DONE job older
-- than pqrun.retention (7 days).
SELECT pqrun.enqueue('m-stale') AS id;   -- 17
SELECT pqrun.enqueue('m-delayed', run_after => now() + interval '1 hour') AS id;  -- 18
SELECT pqrun.enqueue('m-old') AS id;     -- 19
SELECT pqrun.enqueue('m-orphan') AS id;  -- 20
SELECT id FROM pqrun.pickup('w8', job_types => ARRAY['m-stale', 'm-old', 'm-orphan'], batch_size => 3);
SELECT pqrun.mark_done(19);
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '30 minutes' WHERE id = 17;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 18;
UPDATE pqrun.job_done SET finished_at = now() - interval '8 days' WHERE id = 19;
UPDATE pqrun.job_live SET holder_pid = 0 WHERE id = 20;
SELECT pqrun.run_maintenance() AS m \gset
SELECT jsonb_typeof(:'m') AS type, (:'m'::jsonb)->'reaped' AS reaped, (:'m'::jsonb)->'orphaned' AS orphaned,
       (:'m'::jsonb)->'promoted' AS promoted, (:'m'::jsonb)->'purged' AS purged;
SELECT id, status, attempts, last_error FROM pqrun.jobs WHERE id BETWEEN 17 AND 20 ORDER BY id;
SELECT job_id, attempt, worker_id, outcome FROM pqrun.job_attempts WHERE job_id BETWEEN 17 AND 20 ORDER BY job_id, attempt;
COMMIT;
-- A second round finds nothing to do.
SELECT pqrun.run_maintenance() AS m \gset
SELECT (:'m'::jsonb)->'reaped' AS reaped, (:'m'::jsonb)->'orphaned' AS orphaned,
       (:'m'::jsonb)->'promoted' AS promoted, (:'m'::jsonb)->'purged' AS purged;
SELECT id, attempts FROM pqrun.pickup('w9', job_types => ARRAY['m-stale', 'm-delayed', 'm-orphan'], batch_size => 5);

-- 5. purge: only the given statuses, only finished longer ago than
-- older_than, with their history.
SELECT pqrun.enqueue('p') AS id;   -- 21
SELECT pqrun.enqueue('p') AS id;   -- 22
SELECT pqrun.enqueue('p', max_attempts => 2) AS id;   -- 23
SELECT pqrun.enqueue('p') AS id;   -- 24
SELECT pqrun.enqueue('p') AS id;   -- 25
SELECT id FROM pqrun.pickup('w7', job_types => ARRAY['p'], batch_size => 3);
SELECT pqrun.mark_done(21), pqrun.mark_done(22);
SELECT pqrun.mark_error(23, 'retry me', retry_after => '0') AS new_status;
SELECT id FROM pqrun.pickup('w7', job_types => ARRAY['p']);
SELECT pqrun.mark_error(23, 'now fail') AS new_status;
SELECT pqrun.cancel(24), pqrun.cancel(25);
-- Age them (internal table): 21, 23, 24 finished two days ago; 22, 25 now.
UPDATE pqrun.job_done SET finished_at = now() - interval '2 days' WHERE id IN (21, 23, 24);
SELECT id, status, finished_at < now() - interval '1 day' AS old FROM pqrun.jobs WHERE job_type = 'p' ORDER BY id;
SELECT count(*) AS history_of_23 FROM pqrun.job_attempts WHERE job_id = 23;
-- Default statuses {DONE,CANCELLED}: 21 and 24.
SELECT pqrun.purge('1 day') AS purged;
SELECT id, status FROM pqrun.jobs WHERE job_type = 'p' ORDER BY id;
-- Nothing else is that old.
SELECT pqrun.purge('1 day') AS purged;
SELECT pqrun.purge('3 days', '{FAILED}') AS purged;
-- FAILED: 23, with its whole history (the retry attempt and the final one).
SELECT pqrun.purge('1 day', '{FAILED}') AS purged;
SELECT id, status FROM pqrun.jobs WHERE job_type = 'p' ORDER BY id;
SELECT count(*) AS history_of_23 FROM pqrun.job_attempts WHERE job_id = 23;
SELECT count(*) AS log_rows_of_23 FROM pqrun.attempt_log WHERE job_id = 23;
-- Unfinished jobs are never purged, whatever the statuses say.
SELECT count(*) AS unfinished FROM pqrun.jobs WHERE status IN ('READY', 'RUNNING', 'BLOCKED');
SELECT pqrun.purge('0', '{READY,RUNNING,BLOCKED}') AS purged;
SELECT count(*) AS unfinished FROM pqrun.jobs WHERE status IN ('READY', 'RUNNING', 'BLOCKED');
-- '0' purges every finished job of the given statuses finished before now.
SELECT pqrun.purge('0', '{DONE,FAILED,CANCELLED}') AS purged;
SELECT status, count(*) FROM pqrun.jobs GROUP BY status ORDER BY status;
SELECT count(*) AS history_rows FROM pqrun.job_attempts;
