-- lifecycle: mark_done, mark_error (retry with backoff, terminal, attempts
-- exhausted), last_error truncation, heartbeat, lease fencing, and the
-- attempt history in pqrun.job_attempts.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- 1. mark_done: RUNNING -> DONE with finished_at, duration_ms and result.
SELECT pqrun.enqueue('ok') AS id;  -- 1
SELECT id, status FROM pqrun.pickup('w1');
BEGIN;
SELECT pqrun.mark_done(1, '{"answer": 42}');
SELECT id, status, attempts, result, finished_at = now() AS finished_now,
       duration_ms >= 0 AS has_duration, locked_by, last_error
  FROM pqrun.jobs WHERE id = 1;
COMMIT;
-- duration_ms is measured from locked_at (here: locked 2.5 s before the mark,
-- set by moving locked_at back in the internal table).
SELECT pqrun.enqueue('timed') AS id;  -- 2
SELECT id FROM pqrun.pickup('w1');
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '2.5 seconds' WHERE id = 2;
SELECT pqrun.mark_done(2);
SELECT id, status, duration_ms, result FROM pqrun.jobs WHERE id = 2;
COMMIT;

-- 2. mark_error, retry path: READY again, run_after = now() + the first
-- step of the default schedule (1 min), last_error stored, attempts kept.
SHOW pqrun.backoff;
SELECT pqrun.enqueue('flaky', max_attempts => 10) AS id;  -- 3
SELECT id, attempts FROM pqrun.pickup('w1');
BEGIN;
SELECT pqrun.mark_error(3, 'temporary failure') AS new_status;
SELECT id, status, attempts, run_after - now() AS backoff, last_error, locked_by,
       lease_token, locked_at, finished_at
  FROM pqrun.jobs WHERE id = 3;
COMMIT;
-- Not runnable before its run_after.
SELECT count(*) AS picked FROM pqrun.pickup('w1');
-- The default schedule by attempt number: 1 min, 5 min, 30 min, 2 h, 6 h,
-- then 6 h again. (Each round makes the job due by moving run_after back in
-- pqrun.job_live, then picks it and fails it again.)
CREATE FUNCTION pg_temp.fail_again(job bigint) RETURNS TABLE (attempts int, status pqrun.job_status, backoff interval)
LANGUAGE plpgsql AS $$
DECLARE s pqrun.job_status;
BEGIN
	UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = job;
	PERFORM 1 FROM pqrun.pickup('w1', job_types => ARRAY[(SELECT job_type FROM pqrun.jobs j WHERE j.id = job)]);
	s := pqrun.mark_error(job, 'failed again');
	RETURN QUERY SELECT j.attempts, s, j.run_after - now() FROM pqrun.jobs j WHERE j.id = job;
END $$;
SELECT * FROM pg_temp.fail_again(3);
SELECT * FROM pg_temp.fail_again(3);
SELECT * FROM pg_temp.fail_again(3);
SELECT * FROM pg_temp.fail_again(3);
SELECT * FROM pg_temp.fail_again(3);

-- A custom schedule: by attempt number, the last step repeats.
SET pqrun.backoff = '10s,20s';
SELECT pqrun.enqueue('custom', max_attempts => 10) AS id;  -- 4
SELECT id, attempts FROM pqrun.pickup('w1', job_types => ARRAY['custom']);
BEGIN;
SELECT pqrun.mark_error(4, 'e1') AS new_status;
SELECT attempts, run_after - now() AS backoff FROM pqrun.jobs WHERE id = 4;
COMMIT;
SELECT * FROM pg_temp.fail_again(4);
SELECT * FROM pg_temp.fail_again(4);
-- Units and spaces are accepted; a bad schedule is rejected.
SET pqrun.backoff = ' 2 min , 1h ';
SHOW pqrun.backoff;
SELECT * FROM pg_temp.fail_again(4);
SELECT * FROM pg_temp.fail_again(4);
SET pqrun.backoff = 'soon';
SET pqrun.backoff = '';
RESET pqrun.backoff;
SHOW pqrun.backoff;

-- retry_after overrides the schedule.
SELECT pqrun.enqueue('override', max_attempts => 10) AS id;  -- 5
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['override']);
BEGIN;
SELECT pqrun.mark_error(5, 'rate limited', retry_after => interval '42 seconds') AS new_status;
SELECT status, attempts, run_after - now() AS backoff, last_error FROM pqrun.jobs WHERE id = 5;
COMMIT;
-- retry_after => '0' makes it runnable again at once.
BEGIN;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 5;  -- internal: make it due
SELECT id, attempts FROM pqrun.pickup('w1', job_types => ARRAY['override']);
COMMIT;
SELECT pqrun.mark_error(5, 'again', retry_after => '0') AS new_status;
SELECT id, attempts FROM pqrun.pickup('w1', job_types => ARRAY['override']);

-- 3. Terminal error: FAILED at once, even with attempts left.
SELECT pqrun.enqueue('fatal', max_attempts => 10) AS id;  -- 6
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['fatal']);
BEGIN;
SELECT pqrun.mark_error(6, 'bad input', terminal => true) AS new_status;
SELECT id, status, attempts, last_error, finished_at = now() AS finished_now,
       duration_ms >= 0 AS has_duration, result
  FROM pqrun.jobs WHERE id = 6;
COMMIT;

-- 4. Attempts exhausted: the error of the last attempt makes it FAILED.
SELECT pqrun.enqueue('twice', max_attempts => 2) AS id;  -- 7
SELECT id, attempts FROM pqrun.pickup('w1', job_types => ARRAY['twice']);
SELECT pqrun.mark_error(7, 'try 1') AS new_status;
BEGIN;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 7;  -- internal: make it due
SELECT id, attempts FROM pqrun.pickup('w1', job_types => ARRAY['twice']);
COMMIT;
SELECT pqrun.mark_error(7, 'try 2') AS new_status;
SELECT id, status, attempts, max_attempts, last_error, finished_at IS NOT NULL AS finished
  FROM pqrun.jobs WHERE id = 7;
-- max_attempts => 1: the first error is final.
SELECT pqrun.enqueue('once', max_attempts => 1) AS id;  -- 8
SELECT id, attempts FROM pqrun.pickup('w1', job_types => ARRAY['once']);
SELECT pqrun.mark_error(8, 'only try') AS new_status;

-- 5. last_error is cut to 10,000 characters (characters, not bytes).
SELECT pqrun.enqueue('long-error', max_attempts => 3) AS id;  -- 9
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['long-error']);
SELECT pqrun.mark_error(9, repeat('é', 12000)) AS new_status;
SELECT char_length(last_error) AS chars, octet_length(last_error) AS bytes,
       last_error = repeat('é', 10000) AS is_prefix
  FROM pqrun.jobs WHERE id = 9;
SELECT char_length(error) AS history_chars FROM pqrun.job_attempts WHERE job_id = 9;
BEGIN;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 9;  -- internal: make it due
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['long-error']);
COMMIT;
SELECT pqrun.mark_error(9, repeat('x', 9999) || 'yz', terminal => true) AS new_status;
SELECT status, char_length(last_error) AS chars, right(last_error, 2) AS tail
  FROM pqrun.jobs WHERE id = 9;
-- A short error is kept whole.
SELECT pqrun.enqueue('short-error') AS id;  -- 10
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['short-error']);
SELECT pqrun.mark_error(10, repeat('z', 10000), terminal => true) AS new_status;
SELECT char_length(last_error) AS chars FROM pqrun.jobs WHERE id = 10;

-- 6. heartbeat, and lease fencing. The lease is kept in a psql variable.
SELECT pqrun.enqueue('fenced') AS id;  -- 11
SELECT lease_token AS lease FROM pqrun.pickup('w2', job_types => ARRAY['fenced']) \gset
SELECT pqrun.heartbeat(11);
SELECT pqrun.heartbeat(11, :'lease');
SELECT heartbeat_at IS NOT NULL AS heartbeat_recorded FROM pqrun.job_live WHERE id = 11;
\set wrong '00000000-0000-0000-0000-000000000000'
\set VERBOSITY sqlstate
SELECT pqrun.heartbeat(11, :'wrong');
SELECT pqrun.mark_done(11, '{"r": 1}', :'wrong');
SELECT pqrun.mark_error(11, 'x', false, :'wrong');
SELECT pqrun.mark_error(11, 'x', true, :'wrong');
SELECT pqrun.mark_error(11, 'x', lease_token => gen_random_uuid());
\set VERBOSITY default
SELECT pqrun.mark_done(11, NULL, :'wrong');
-- Nothing changed.
SELECT id, status, attempts, locked_by, last_error, result, lease_token = :'lease' AS same_lease
  FROM pqrun.jobs WHERE id = 11;
-- A worker's side effects in the same transaction roll back with the failed mark.
CREATE TEMP TABLE side_effects (note text);
BEGIN;
INSERT INTO side_effects VALUES ('sent the email');
SELECT pqrun.mark_done(11, NULL, :'wrong');
ROLLBACK;
SELECT count(*) AS side_effects FROM side_effects;
-- The right lease works.
SELECT pqrun.mark_done(11, '{"r": 2}', :'lease');
SELECT id, status, result FROM pqrun.jobs WHERE id = 11;
-- The job is no longer running: every mark raises 55000 and changes nothing.
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(11, NULL, :'lease');
SELECT pqrun.mark_done(11);
SELECT pqrun.mark_error(11, 'late');
SELECT pqrun.heartbeat(11);
SELECT pqrun.heartbeat(11, :'lease');
\set VERBOSITY default
SELECT pqrun.mark_done(11);
SELECT pqrun.heartbeat(11);
SELECT id, status, result, last_error FROM pqrun.jobs WHERE id = 11;
-- A READY job (never picked, or waiting for retry) is not running either.
SELECT pqrun.enqueue('never-picked') AS id;  -- 12
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(12);
SELECT pqrun.mark_error(12, 'x');
SELECT pqrun.heartbeat(12);
SELECT pqrun.mark_error(3, 'x');  -- job 3 is READY, waiting for its retry
-- Unknown ids: P0002.
SELECT pqrun.mark_done(999);
SELECT pqrun.mark_error(999, 'x');
SELECT pqrun.heartbeat(999);
SELECT pqrun.mark_done(999, NULL, :'lease');
\set VERBOSITY default
SELECT pqrun.mark_done(999);
SELECT id, status, attempts FROM pqrun.jobs WHERE id IN (3, 12) ORDER BY id;

-- A stale lease: after the job is re-picked, the old lease is refused.
SELECT pqrun.enqueue('repicked', max_attempts => 5) AS id;  -- 13
SELECT lease_token AS old_lease FROM pqrun.pickup('w3', job_types => ARRAY['repicked']) \gset
SELECT pqrun.mark_error(13, 'went away', retry_after => '0') AS new_status;
SELECT lease_token AS new_lease FROM pqrun.pickup('w4', job_types => ARRAY['repicked']) \gset
SELECT :'old_lease' <> :'new_lease' AS lease_changed;
\set VERBOSITY sqlstate
SELECT pqrun.mark_done(13, NULL, :'old_lease');
SELECT pqrun.heartbeat(13, :'old_lease');
\set VERBOSITY default
SELECT pqrun.mark_done(13, '"fine"', :'new_lease');
SELECT id, status, attempts, locked_by, result FROM pqrun.jobs WHERE id = 13;

-- 7. The attempt history: one row per attempt, numbered from 1, with the
-- worker and the outcome (NULL while running).
SELECT pqrun.enqueue('history', max_attempts => 3) AS id;  -- 14
SELECT id FROM pqrun.pickup('h1', job_types => ARRAY['history']);
SELECT job_id, attempt, worker_id, started_at IS NOT NULL AS started, finished_at, outcome, error
  FROM pqrun.job_attempts WHERE job_id = 14 ORDER BY attempt;
SELECT pqrun.mark_error(14, 'e1', retry_after => '0') AS new_status;
SELECT id FROM pqrun.pickup('h2', job_types => ARRAY['history']);
SELECT pqrun.mark_error(14, 'e2', retry_after => '0') AS new_status;
SELECT id FROM pqrun.pickup('h3', job_types => ARRAY['history']);
SELECT pqrun.mark_error(14, 'e3') AS new_status;
SELECT job_id, attempt, worker_id, started_at IS NOT NULL AS started,
       finished_at >= started_at AS finished_after_start, outcome, error
  FROM pqrun.job_attempts WHERE job_id = 14 ORDER BY attempt;
-- stale: an attempt that went stale is reaped (locked_at moved 30 min back
-- in the internal table, in the same transaction as the reap) and the job
-- goes back to READY; the next attempt is number 2.
SELECT pqrun.enqueue('stale-then-done') AS id;  -- 15
SELECT id FROM pqrun.pickup('s1', job_types => ARRAY['stale-then-done']);
BEGIN;
UPDATE pqrun.job_live SET locked_at = now() - interval '30 minutes' WHERE id = 15;
SELECT pqrun.reap_stale() AS reaped;
COMMIT;
SELECT id, attempts FROM pqrun.pickup('s2', job_types => ARRAY['stale-then-done']);
SELECT pqrun.mark_done(15);
-- cancelled: a running job cancelled by an operator.
SELECT pqrun.enqueue('cancelled-while-running') AS id;  -- 16
SELECT id FROM pqrun.pickup('c1', job_types => ARRAY['cancelled-while-running']);
SELECT pqrun.cancel(16, 'operator said so');
-- A job cancelled before it ever ran has no attempt.
SELECT pqrun.enqueue('cancelled-while-ready') AS id;  -- 17
SELECT pqrun.cancel(17);

-- All attempts of this file, with every outcome.
SELECT job_id, attempt, worker_id, outcome, left(error, 20) AS error
  FROM pqrun.job_attempts ORDER BY job_id, attempt;
SELECT id, job_type, status, attempts FROM pqrun.jobs ORDER BY id;

-- mark_done_batch: every job of the array done in one call, dependents
-- released and FIFO successors unblocked as mark_done does; leases fence
-- position by position.
TRUNCATE pqrun.job_live, pqrun.job_done, pqrun.attempt_log, pqrun.job_dep;
SELECT setval('pqrun.job_id_seq', 300, true);  -- internal
SELECT count(*) FROM pqrun.enqueue_batch('[
  {"job_type": "mb"}, {"job_type": "mb"}, {"job_type": "mb", "fifo_key": "mbf"},
  {"job_type": "mb-next", "fifo_key": "mbf"}, {"job_type": "mb-child", "depends_on": [301, 302]}]');
SELECT id, status FROM pqrun.jobs WHERE id > 300 ORDER BY id;
SELECT array_agg(id ORDER BY id) AS ids, array_agg(lease_token ORDER BY id) AS leases
  FROM pqrun.pickup('mb', job_types => ARRAY['mb'], batch_size => 10) \gset
SELECT :'ids' AS picked;
SELECT pqrun.mark_done_batch(:'ids', :'leases') AS marked;
SELECT id, status, finished_at IS NOT NULL AS finished FROM pqrun.jobs WHERE id > 300 ORDER BY id;
SELECT job_type, done, ready FROM pqrun.queue_stats WHERE job_type LIKE 'mb%' ORDER BY job_type;
SELECT pqrun.mark_done_batch('{}') AS marked_none;
-- All or nothing: one job that is not running fails the call, with
-- mark_done's error, and changes nothing.
SELECT id FROM pqrun.pickup('mb', job_types => ARRAY['mb-next', 'mb-child'], batch_size => 10) ORDER BY id;
SELECT pqrun.mark_done_batch('{304, 301}');
SELECT pqrun.mark_done_batch('{304, 999}');
SELECT pqrun.mark_done_batch('{304}', ARRAY[gen_random_uuid()]);
SELECT id, status FROM pqrun.jobs WHERE id IN (304, 305) ORDER BY id;
-- Bad arrays: 22023.
\set VERBOSITY sqlstate
SELECT pqrun.mark_done_batch(NULL);
SELECT pqrun.mark_done_batch('{304, NULL}');
SELECT pqrun.mark_done_batch('{304, 304}');
SELECT pqrun.mark_done_batch('{304, 305}', ARRAY[gen_random_uuid()]);
SELECT pqrun.mark_done_batch('{304}', ARRAY[NULL::uuid]);
SELECT pqrun.mark_done_batch('{{304}, {305}}');
\set VERBOSITY default
SELECT pqrun.mark_done_batch('{304, 305}') AS marked;
SELECT id, status FROM pqrun.jobs WHERE id IN (304, 305) ORDER BY id;
