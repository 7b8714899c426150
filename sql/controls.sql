-- controls: what a worker can do with the job it runs besides finishing it
-- (0.8.0). heartbeat reports progress (kept across attempts and into the
-- history) and can wait for its lease to end; release gives the job back
-- without using up its attempt, snooze does so for a while and counts it.
-- Each is fenced by the lease as mark_done is, and bad input gets 22023 and
-- changes nothing.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

SELECT pqrun.enqueue('p', max_attempts => 2) AS p \gset
SELECT id, progress, snoozes FROM pqrun.pickup('w', job_types => ARRAY['p']);
SELECT lease_token AS lp FROM pqrun.jobs WHERE id = :p \gset

-- 1. Progress: stored by the heartbeat that brings it, kept by one without,
-- shown in pqrun.jobs.
SELECT pqrun.heartbeat(:p, :'lp', '{"done": 10, "of": 100}');
SELECT pqrun.heartbeat(:p, :'lp');
SELECT status, progress, heartbeat_at IS NOT NULL AS beat FROM pqrun.job_live WHERE id = :p;
SELECT progress FROM pqrun.jobs WHERE id = :p;

-- 2. A retried job's next attempt is handed its progress, and the history
-- keeps the last one.
SELECT pqrun.mark_error(:p, 'transient', retry_after => '0');
SELECT id, attempts, progress FROM pqrun.pickup('w', job_types => ARRAY['p']);
SELECT lease_token AS lp FROM pqrun.jobs WHERE id = :p \gset
SELECT pqrun.heartbeat(:p, :'lp', '{"done": 100, "of": 100}');
SELECT pqrun.mark_done(:p, '{"ok": true}', :'lp');
SELECT status, attempts, progress, result FROM pqrun.jobs WHERE id = :p;

-- 3. Release: READY at once, the attempt given back, nothing in the
-- history; the old lease is dead, the next pickup is attempt 1 again.
SELECT pqrun.enqueue('r', max_attempts => 1) AS r \gset
SELECT lease_token AS lr FROM pqrun.pickup('w', job_types => ARRAY['r']) \gset
SELECT pqrun.release(:r, :'lr');
SELECT status, attempts, locked_by, lease_token, snoozes FROM pqrun.jobs WHERE id = :r;
SELECT count(*) AS attempts_logged FROM pqrun.job_attempts WHERE job_id = :r;
\set ON_ERROR_STOP 0
SELECT pqrun.release(:r, :'lr');
SELECT pqrun.heartbeat(:r, :'lr');
\set ON_ERROR_STOP 1
SELECT id, attempts FROM pqrun.pickup('w', job_types => ARRAY['r']);
-- max_attempts 1: the one real attempt still fails it for good.
SELECT pqrun.mark_error(:r, 'boom');

-- 4. Snooze: READY again after the delay (delayed meanwhile, so no pickup
-- sees it), the attempt given back, counted in snoozes.
SELECT pqrun.enqueue('s') AS s \gset
SELECT lease_token AS ls FROM pqrun.pickup('w', job_types => ARRAY['s']) \gset
SELECT pqrun.snooze(:s, '1 hour', :'ls');
SELECT status, delayed, attempts, snoozes, run_after BETWEEN now() + '59 min' AND now() + '1 hour' AS in_an_hour
  FROM pqrun.job_live WHERE id = :s;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['s']);
UPDATE pqrun.job_live SET run_after = now() - interval '1 s' WHERE id = :s;
SELECT id, attempts, snoozes FROM pqrun.pickup('w', job_types => ARRAY['s']);
SELECT lease_token AS ls FROM pqrun.jobs WHERE id = :s \gset
SELECT pqrun.snooze(:s, '0', :'ls');
SELECT status, delayed, snoozes FROM pqrun.job_live WHERE id = :s;
SELECT id, attempts, snoozes FROM pqrun.pickup('w', job_types => ARRAY['s']);
SELECT pqrun.mark_done(:s);
SELECT status, attempts, snoozes FROM pqrun.jobs WHERE id = :s;

-- 5. A FIFO group's head given back stays its head: the next job waits.
SELECT pqrun.enqueue('f', fifo_key => 'g') AS f1 \gset
SELECT pqrun.enqueue('f', fifo_key => 'g') AS f2 \gset
SELECT lease_token AS lf FROM pqrun.pickup('w', job_types => ARRAY['f']) \gset
SELECT pqrun.release(:f1, :'lf');
SELECT id, status FROM pqrun.jobs WHERE job_type = 'f' ORDER BY id;
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['f'], batch_size => 2);
SELECT pqrun.snooze(:f1, '1 hour');
SELECT id, status, delayed FROM pqrun.job_live WHERE job_type = 'f' ORDER BY id;

-- 6. A waiting heartbeat: returns after its wait and renews the lease; for
-- a job it does not hold it raises at once, as without a wait, unless its
-- lease finished the job (its worker's own mark_done): then it returns
-- without renewing anything.
SELECT pqrun.enqueue('h') AS h \gset
SELECT lease_token AS lh FROM pqrun.pickup('w', job_types => ARRAY['h']) \gset
SELECT pqrun.heartbeat(:h, :'lh', '{"step": 1}', '50 ms');
SELECT heartbeat_at >= clock_timestamp() - '1 minute'::interval AS renewed, progress FROM pqrun.job_live WHERE id = :h;
\set ON_ERROR_STOP 0
SELECT pqrun.heartbeat(:h, gen_random_uuid(), NULL, '10 s');
SELECT pqrun.heartbeat(:s, NULL, NULL, '10 s');
\set ON_ERROR_STOP 1
SELECT pqrun.enqueue('h2') AS h2 \gset
SELECT lease_token AS lh2 FROM pqrun.pickup('w', job_types => ARRAY['h2']) \gset
SELECT pqrun.mark_done(:h2, NULL, :'lh2');
SELECT pqrun.heartbeat(:h2, :'lh2', '{"late": true}', '10 s');
SELECT status, progress FROM pqrun.jobs WHERE id = :h2;
\set ON_ERROR_STOP 0
SELECT pqrun.heartbeat(:h2, :'lh2');
SELECT pqrun.heartbeat(:h2, NULL, NULL, '10 s');
\set ON_ERROR_STOP 1

-- 7. Bad input: 22023 (0A000 for a wait its snapshot could not see end),
-- nothing changed.
\set ON_ERROR_STOP 0
SELECT pqrun.heartbeat(:h, :'lh', jsonb_build_object('log', repeat('x', 9000)));
SELECT pqrun.heartbeat(:h, :'lh', NULL, '-1 s');
SELECT pqrun.heartbeat(:h, :'lh', NULL, NULL);
SELECT pqrun.heartbeat(NULL);
SELECT pqrun.snooze(:h, '-1 s', :'lh');
SELECT pqrun.snooze(:h, NULL, :'lh');
SELECT pqrun.snooze(:h, '200 years', :'lh');
SELECT pqrun.release(NULL);
SELECT pqrun.release(999999);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pqrun.heartbeat(:h, :'lh', NULL, '1 s');
ROLLBACK;
\set ON_ERROR_STOP 1
SELECT status, attempts, snoozes, progress FROM pqrun.jobs WHERE id = :h;
