-- fifo: jobs sharing a fifo_key run strictly one at a time, in id order,
-- across queues and job types; DONE, FAILED and CANCELLED of the head let the
-- next one run, a head waiting for its retry keeps the group waiting.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- 1. One at a time, in id order. The head is READY, the rest BLOCKED.
SELECT pqrun.enqueue('step', fifo_key => 'acct-1', payload => '{"n": 1}') AS id;  -- 1
SELECT pqrun.enqueue('step', fifo_key => 'acct-1', payload => '{"n": 2}') AS id;  -- 2
SELECT pqrun.enqueue('step', fifo_key => 'acct-1', payload => '{"n": 3}', priority => 100) AS id;  -- 3
SELECT id, status, priority, fifo_key FROM pqrun.jobs ORDER BY id;
-- Even a large batch gets only the head (priority does not jump the queue).
SELECT id, payload FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS picked FROM pqrun.pickup('w', batch_size => 10);
-- The head RUNNING keeps the others BLOCKED; DONE releases the next one only.
SELECT pqrun.mark_done(1);
SELECT id, status FROM pqrun.jobs ORDER BY id;
SELECT id, payload FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.mark_done(2);
SELECT id, status FROM pqrun.jobs ORDER BY id;
SELECT id, payload FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.mark_done(3);
-- An empty group: the next job starts READY.
SELECT pqrun.enqueue('step', fifo_key => 'acct-1') AS id;  -- 4
SELECT id, status FROM pqrun.jobs WHERE id = 4;
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_done(4);

-- 2. FAILED (terminal, or attempts exhausted) and CANCELLED heads advance
-- the group too.
SELECT pqrun.enqueue('f', fifo_key => 'g2') AS id;  -- 5
SELECT pqrun.enqueue('f', fifo_key => 'g2', max_attempts => 1) AS id;  -- 6
SELECT pqrun.enqueue('f', fifo_key => 'g2') AS id;  -- 7
SELECT pqrun.enqueue('f', fifo_key => 'g2') AS id;  -- 8
SELECT pqrun.enqueue('f', fifo_key => 'g2') AS id;  -- 9
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_error(5, 'fatal', terminal => true) AS new_status;
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g2' ORDER BY id;
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_error(6, 'no attempts left') AS new_status;
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g2' ORDER BY id;
-- Cancel of a RUNNING head.
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.cancel(7, 'stop it');
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g2' ORDER BY id;
-- Cancel of a READY head (never picked).
SELECT pqrun.cancel(8);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g2' ORDER BY id;
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_done(9);

-- 3. A head waiting for its retry keeps the group waiting, also once its
-- retry is due and while it runs again.
SELECT pqrun.enqueue('r', fifo_key => 'g3', max_attempts => 3) AS id;  -- 10
SELECT pqrun.enqueue('r', fifo_key => 'g3') AS id;  -- 11
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_error(10, 'try again') AS new_status;
SELECT id, status, run_after > now() AS waiting FROM pqrun.jobs WHERE fifo_key = 'g3' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', batch_size => 10);
\set VERBOSITY sqlstate
SELECT pqrun.mark_error(10, 'x');  -- not running: 55000, nothing changes
\set VERBOSITY default
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g3' ORDER BY id;
-- retry_after => '0': the head itself runs again, not job 11.
SELECT id FROM pqrun.pickup('w');  -- still nothing: the head is backed off
BEGIN;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 10;  -- internal: make the retry due
SELECT id, attempts FROM pqrun.pickup('w', batch_size => 10);
COMMIT;
SELECT pqrun.mark_error(10, 'again', retry_after => '0') AS new_status;
SELECT id, attempts FROM pqrun.pickup('w', batch_size => 10);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g3' ORDER BY id;
SELECT pqrun.mark_done(10);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'g3' ORDER BY id;
SELECT id FROM pqrun.pickup('w');
SELECT pqrun.mark_done(11);

-- 4. Different keys are independent; jobs without a key are unaffected.
SELECT pqrun.enqueue('k', fifo_key => 'ka') AS id;  -- 12
SELECT pqrun.enqueue('k', fifo_key => 'kb') AS id;  -- 13
SELECT pqrun.enqueue('k', fifo_key => 'ka') AS id;  -- 14
SELECT pqrun.enqueue('k', fifo_key => 'kb') AS id;  -- 15
SELECT pqrun.enqueue('k') AS id;  -- 16
SELECT pqrun.enqueue('k') AS id;  -- 17
SELECT id, status, fifo_key FROM pqrun.jobs WHERE job_type = 'k' ORDER BY id;
SELECT id, fifo_key FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.mark_done(13);
SELECT id, status, fifo_key FROM pqrun.jobs WHERE job_type = 'k' ORDER BY id;
SELECT id, fifo_key FROM pqrun.pickup('w', batch_size => 10);

-- 5. A group spans queues and job types.
SELECT pqrun.enqueue('type-a', queue => 'q1', fifo_key => 'span') AS id;  -- 18
SELECT pqrun.enqueue('type-b', queue => 'q2', fifo_key => 'span') AS id;  -- 19
SELECT pqrun.enqueue('type-c', queue => 'q3', fifo_key => 'span') AS id;  -- 20
SELECT id, job_type, queue, status FROM pqrun.jobs WHERE fifo_key = 'span' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', queues => ARRAY['q2', 'q3'], batch_size => 10);
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['type-b', 'type-c'], batch_size => 10);
SELECT id FROM pqrun.pickup('w', queues => ARRAY['q1']);
SELECT pqrun.mark_done(18);
SELECT id, job_type, queue, status FROM pqrun.jobs WHERE fifo_key = 'span' ORDER BY id;
SELECT id FROM pqrun.pickup('w', queues => ARRAY['q2', 'q3'], batch_size => 10);

-- 6. Cancelling a BLOCKED member lets nothing jump ahead: the head keeps
-- running, and the member after the cancelled one still waits for it.
SELECT pqrun.enqueue('c', fifo_key => 'gc') AS id;  -- 21
SELECT pqrun.enqueue('c', fifo_key => 'gc') AS id;  -- 22
SELECT pqrun.enqueue('c', fifo_key => 'gc') AS id;  -- 23
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['c']);
SELECT pqrun.cancel(22, 'not needed');
SELECT id, status, last_error FROM pqrun.jobs WHERE fifo_key = 'gc' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['c']);
SELECT pqrun.mark_done(21);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'gc' ORDER BY id;
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['c']);
-- Cancelling a READY head whose successor is BLOCKED releases the successor.
SELECT pqrun.enqueue('c2', fifo_key => 'gc2') AS id;  -- 24
SELECT pqrun.enqueue('c2', fifo_key => 'gc2') AS id;  -- 25
SELECT pqrun.cancel(24);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'gc2' ORDER BY id;

-- 7. A delayed job at the head holds the group until it has run.
SELECT pqrun.enqueue('d', fifo_key => 'gd', run_after => now() + interval '1 hour') AS id;  -- 26
SELECT pqrun.enqueue('d', fifo_key => 'gd') AS id;  -- 27
SELECT id, status, run_after > now() AS delayed FROM pqrun.jobs WHERE fifo_key = 'gd' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['d'], batch_size => 10);
-- A delayed member released from BLOCKED stays delayed until due.
SELECT pqrun.enqueue('e', fifo_key => 'ge') AS id;  -- 28
SELECT pqrun.enqueue('e', fifo_key => 'ge', run_after => now() + interval '1 hour') AS id;  -- 29
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['e']);
SELECT pqrun.mark_done(28);
SELECT id, status, run_after > now() AS delayed FROM pqrun.jobs WHERE fifo_key = 'ge' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['e']);

-- 8. fifo_key with depends_on: a member waits for both its turn and its
-- dependencies; the group waits behind a head that is blocked by a dependency.
SELECT pqrun.enqueue('dep') AS id;  -- 30
SELECT pqrun.enqueue('m', fifo_key => 'gm', depends_on => ARRAY[30]::bigint[]) AS id;  -- 31
SELECT pqrun.enqueue('m', fifo_key => 'gm') AS id;  -- 32
SELECT id, status FROM pqrun.jobs WHERE id BETWEEN 30 AND 32 ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['m'], batch_size => 10);
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['dep']);
SELECT pqrun.mark_done(30);
SELECT id, status FROM pqrun.jobs WHERE id BETWEEN 30 AND 32 ORDER BY id;
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['m'], batch_size => 10);
SELECT pqrun.mark_done(31);
SELECT id, status FROM pqrun.jobs WHERE id BETWEEN 30 AND 32 ORDER BY id;
-- The head's dependency failing cancels the head, and the group moves on.
SELECT pqrun.enqueue('dep2') AS id;  -- 33
SELECT pqrun.enqueue('n', fifo_key => 'gn', depends_on => ARRAY[33]::bigint[]) AS id;  -- 34
SELECT pqrun.enqueue('n', fifo_key => 'gn') AS id;  -- 35
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['dep2']);
SELECT pqrun.mark_error(33, 'broken', terminal => true) AS new_status;
SELECT id, status, last_error FROM pqrun.jobs WHERE id BETWEEN 33 AND 35 ORDER BY id;

-- 9. A job enqueued with a dependency already FAILED never holds its group.
SELECT pqrun.enqueue('o', fifo_key => 'go', depends_on => ARRAY[33]::bigint[]) AS id;  -- 36
SELECT pqrun.enqueue('o', fifo_key => 'go') AS id;  -- 37
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'go' ORDER BY id;

-- 10. retry() of a finished member puts it back in its group: while another
-- member is unfinished it waits (BLOCKED), then it runs before the later ids.
SELECT pqrun.enqueue('t', fifo_key => 'gt') AS id;  -- 38
SELECT pqrun.enqueue('t', fifo_key => 'gt') AS id;  -- 39
SELECT pqrun.enqueue('t', fifo_key => 'gt') AS id;  -- 40
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['t']);
SELECT pqrun.mark_error(38, 'fatal', terminal => true) AS new_status;
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['t']);
SELECT pqrun.retry(38);
-- A maintenance round leaves it BLOCKED: its group has a member running
-- (0.15.0's backstop released it, the group's lowest id, to run beside 39).
SELECT (pqrun.run_maintenance()->>'unblocked')::int AS unblocked;
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'gt' ORDER BY id;
SELECT pqrun.mark_done(39);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'gt' ORDER BY id;
SELECT id, attempts FROM pqrun.pickup('w', job_types => ARRAY['t'], batch_size => 10);
SELECT pqrun.mark_done(38);
SELECT id, status FROM pqrun.jobs WHERE fifo_key = 'gt' ORDER BY id;
-- With the group idle, a retried member is READY at once.
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['t']);
SELECT pqrun.cancel(40);
SELECT pqrun.retry(40);
SELECT id, status FROM pqrun.jobs WHERE id = 40;

SELECT id, job_type, fifo_key, status FROM pqrun.jobs WHERE fifo_key IS NOT NULL ORDER BY id;

-- One call into 20,000 groups takes 1,024 group locks at most: the groups
-- share 1,024 locks (0.17.0 took one per group, and this call failed with
-- 53200, out of shared memory, at the default max_locks_per_transaction).
BEGIN;
SELECT count(*) FROM pqrun.enqueue_batch((SELECT jsonb_agg(jsonb_build_object('job_type', 'many', 'fifo_key', 'group-' || g))
                                            FROM generate_series(1, 20000) g));
SELECT count(*) BETWEEN 1000 AND 1024 AS bounded FROM pg_locks
 WHERE locktype = 'advisory' AND classid = 1886745198 AND pid = pg_backend_pid();
ROLLBACK;
