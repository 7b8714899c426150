-- dependencies: depends_on starts a job BLOCKED; it becomes READY when all
-- its dependencies are DONE, and CANCELLED (with its own dependents) when
-- one of them ends FAILED or CANCELLED.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

CREATE FUNCTION pg_temp.finish(job bigint) RETURNS void LANGUAGE sql AS $$
	-- pick exactly this job (by its unique job_type) and mark it DONE
	SELECT pqrun.mark_done(p.id) FROM pqrun.pickup('w', job_types => ARRAY[(SELECT job_type FROM pqrun.jobs WHERE id = job)]) p;
$$;
CREATE FUNCTION pg_temp.fail(job bigint) RETURNS pqrun.job_status LANGUAGE sql AS $$
	SELECT pqrun.mark_error(p.id, 'it broke', terminal => true) FROM pqrun.pickup('w', job_types => ARRAY[(SELECT job_type FROM pqrun.jobs WHERE id = job)]) p;
$$;

-- 1. BLOCKED until every dependency is DONE, released one at a time.
SELECT pqrun.enqueue('a') AS id;  -- 1
SELECT pqrun.enqueue('b') AS id;  -- 2
SELECT pqrun.enqueue('c', depends_on => ARRAY[1, 2]::bigint[]) AS id;  -- 3
SELECT id, status, depends_on FROM pqrun.jobs ORDER BY id;
-- A BLOCKED job is never picked up.
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['c']);
-- Dependency 1 DONE: still BLOCKED (2 is pending).
SELECT pg_temp.finish(1);
SELECT id, status FROM pqrun.jobs ORDER BY id;
-- Dependency 2 RUNNING: still BLOCKED.
SELECT id, status FROM pqrun.pickup('w', job_types => ARRAY['b']);
SELECT id, status FROM pqrun.jobs WHERE id = 3;
-- A retry of a dependency (mark_error, not terminal) does not release it.
SELECT pqrun.mark_error(2, 'transient', retry_after => '0') AS new_status;
SELECT id, status FROM pqrun.jobs WHERE id = 3;
-- Dependency 2 DONE: now READY, and runnable at once.
SELECT pg_temp.finish(2);
SELECT id, status FROM pqrun.jobs ORDER BY id;
SELECT id, status, attempts FROM pqrun.pickup('w', job_types => ARRAY['c']);
SELECT pqrun.mark_done(3);

-- 2. Dependencies already DONE count as met.
SELECT pqrun.enqueue('d', depends_on => ARRAY[1, 2]::bigint[]) AS id;  -- 4
SELECT id, status FROM pqrun.jobs WHERE id = 4;
-- Mixed: one DONE, one not yet.
SELECT pqrun.enqueue('e') AS id;  -- 5
SELECT pqrun.enqueue('f', depends_on => ARRAY[1, 5]::bigint[]) AS id;  -- 6
SELECT id, status FROM pqrun.jobs WHERE id = 6;
SELECT pg_temp.finish(5);
SELECT id, status FROM pqrun.jobs WHERE id = 6;
-- A dependency listed twice is waited for once.
SELECT pqrun.enqueue('g') AS id;  -- 7
SELECT pqrun.enqueue('h', depends_on => ARRAY[7, 7]::bigint[]) AS id;  -- 8
SELECT pg_temp.finish(7);
SELECT id, status, depends_on FROM pqrun.jobs WHERE id = 8;
-- An empty depends_on array means no dependencies.
SELECT pqrun.enqueue('i', depends_on => '{}') AS id;  -- 9
SELECT id, status FROM pqrun.jobs WHERE id = 9;
-- A dependent with a future run_after becomes READY but stays delayed.
SELECT pqrun.enqueue('j') AS id;  -- 10
SELECT pqrun.enqueue('k', depends_on => ARRAY[10]::bigint[], run_after => now() + interval '1 hour') AS id;  -- 11
SELECT pg_temp.finish(10);
SELECT id, status, run_after > now() AS in_future FROM pqrun.jobs WHERE id = 11;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['k']);

-- 3. A dependency ends FAILED: its dependents are CANCELLED, and theirs too
-- (a chain of three), with the reason in last_error and finished_at set.
SELECT pqrun.enqueue('root') AS id;  -- 12
SELECT pqrun.enqueue('mid', depends_on => ARRAY[12]::bigint[]) AS id;  -- 13
SELECT pqrun.enqueue('leaf', depends_on => ARRAY[13]::bigint[]) AS id;  -- 14
SELECT pqrun.enqueue('other') AS id;  -- 15
SELECT pqrun.enqueue('two-deps', depends_on => ARRAY[15, 12]::bigint[]) AS id;  -- 16
SELECT id, status FROM pqrun.jobs WHERE id BETWEEN 12 AND 16 ORDER BY id;
BEGIN;
SELECT pg_temp.fail(12);
SELECT id, status, last_error, finished_at = now() AS finished_now, attempts
  FROM pqrun.jobs WHERE id BETWEEN 12 AND 16 ORDER BY id;
COMMIT;
-- The other dependency finishing later changes nothing for job 16.
SELECT pg_temp.finish(15);
SELECT id, status FROM pqrun.jobs WHERE id = 16;
-- Cancelled dependents have no attempt (they never ran).
SELECT job_id, attempt, outcome FROM pqrun.job_attempts WHERE job_id BETWEEN 12 AND 16 ORDER BY job_id, attempt;

-- Attempts exhausted counts as FAILED too.
SELECT pqrun.enqueue('fragile', max_attempts => 1) AS id;  -- 17
SELECT pqrun.enqueue('after-fragile', depends_on => ARRAY[17]::bigint[]) AS id;  -- 18
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['fragile']);
SELECT pqrun.mark_error(17, 'out of attempts') AS new_status;
SELECT id, status, last_error FROM pqrun.jobs WHERE id IN (17, 18) ORDER BY id;
-- A dependency that is retried (not terminal, attempts left) keeps its
-- dependents BLOCKED.
SELECT pqrun.enqueue('sturdy', max_attempts => 3) AS id;  -- 19
SELECT pqrun.enqueue('after-sturdy', depends_on => ARRAY[19]::bigint[]) AS id;  -- 20
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['sturdy']);
SELECT pqrun.mark_error(19, 'will retry') AS new_status;
SELECT id, status FROM pqrun.jobs WHERE id IN (19, 20) ORDER BY id;

-- 4. A dependency ends CANCELLED: same cascade.
SELECT pqrun.enqueue('c-root') AS id;  -- 21
SELECT pqrun.enqueue('c-mid', depends_on => ARRAY[21]::bigint[]) AS id;  -- 22
SELECT pqrun.enqueue('c-leaf', depends_on => ARRAY[22]::bigint[]) AS id;  -- 23
SELECT pqrun.cancel(21, 'not needed');
SELECT id, status, last_error, finished_at IS NOT NULL AS finished FROM pqrun.jobs WHERE id BETWEEN 21 AND 23 ORDER BY id;
-- Cancelling a RUNNING dependency, and a BLOCKED one in the middle of a chain.
SELECT pqrun.enqueue('r-root') AS id;  -- 24
SELECT pqrun.enqueue('r-mid', depends_on => ARRAY[24]::bigint[]) AS id;  -- 25
SELECT pqrun.enqueue('r-leaf', depends_on => ARRAY[25]::bigint[]) AS id;  -- 26
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['r-root']);
SELECT pqrun.cancel(25, 'skip the middle');
SELECT id, status, last_error FROM pqrun.jobs WHERE id BETWEEN 24 AND 26 ORDER BY id;
-- The root finishing DONE afterwards does not revive them.
SELECT pqrun.mark_done(24);
SELECT id, status FROM pqrun.jobs WHERE id BETWEEN 24 AND 26 ORDER BY id;

-- 5. Enqueued with a dependency that already ended FAILED or CANCELLED:
-- CANCELLED at once (never runnable), with finished_at set.
BEGIN;
SELECT pqrun.enqueue('late-failed', depends_on => ARRAY[12]::bigint[]) AS id;  -- 27
SELECT pqrun.enqueue('late-cancelled', depends_on => ARRAY[21]::bigint[]) AS id;  -- 28
SELECT pqrun.enqueue('late-mixed', depends_on => ARRAY[1, 12]::bigint[]) AS id;  -- 29
SELECT pqrun.enqueue('late-live', depends_on => ARRAY[19, 21]::bigint[]) AS id;  -- 30
SELECT id, status, attempts, last_error, finished_at = now() AS finished_now
  FROM pqrun.jobs WHERE id BETWEEN 27 AND 30 ORDER BY id;
COMMIT;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['late-failed', 'late-cancelled', 'late-mixed', 'late-live']);
-- ... and a job depending on one of those is cancelled at once as well.
SELECT pqrun.enqueue('later-still', depends_on => ARRAY[27]::bigint[]) AS id;  -- 31
SELECT id, status FROM pqrun.jobs WHERE id = 31;
-- A job that depends on a BLOCKED job waits for it.
SELECT pqrun.enqueue('wait-blocked', depends_on => ARRAY[20]::bigint[]) AS id;  -- 32
SELECT id, status FROM pqrun.jobs WHERE id = 32;
BEGIN;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 19;  -- internal: make the retry due
SELECT pg_temp.finish(19);
COMMIT;
SELECT id, status FROM pqrun.jobs WHERE id IN (19, 20, 32) ORDER BY id;
SELECT pg_temp.finish(20);
SELECT id, status FROM pqrun.jobs WHERE id IN (19, 20, 32) ORDER BY id;

-- 6. Bad dependencies: an unknown id or a NULL element is rejected with
-- 22023 and nothing is enqueued.
SELECT count(*) AS jobs FROM pqrun.jobs;
\set VERBOSITY sqlstate
SELECT pqrun.enqueue('bad', depends_on => ARRAY[999]::bigint[]);
SELECT pqrun.enqueue('bad', depends_on => ARRAY[1, 999]::bigint[]);
SELECT pqrun.enqueue('bad', depends_on => ARRAY[12, 999]::bigint[]);
SELECT pqrun.enqueue('bad', depends_on => ARRAY[1, NULL]::bigint[]);
SELECT pqrun.enqueue('bad', depends_on => ARRAY[NULL]::bigint[]);
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "bad", "depends_on": [999]}]');
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "bad", "depends_on": [1, null]}]');
\set VERBOSITY default
SELECT pqrun.enqueue('bad', depends_on => ARRAY[1, 999]::bigint[]);
SELECT pqrun.enqueue('bad', depends_on => ARRAY[1, NULL]::bigint[]);
SELECT count(*) AS jobs FROM pqrun.jobs;
SELECT count(*) AS bad FROM pqrun.jobs WHERE job_type = 'bad';

-- Final states.
SELECT id, job_type, status, depends_on FROM pqrun.jobs ORDER BY id;
