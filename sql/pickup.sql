-- pickup: claim order, batch size, filters, the claimed row's fields,
-- delayed jobs, long poll without jobs, and no double claims.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- 1. Nothing runnable: no rows, also with a short long-poll.
SELECT * FROM pqrun.pickup('w1');
SELECT count(*) AS picked FROM pqrun.pickup('w1', wait => '10 ms');

-- 2. Order: priority DESC, then id ASC.
SELECT pqrun.enqueue('t', priority => 0) AS id;   -- 1
SELECT pqrun.enqueue('t', priority => 5) AS id;   -- 2
SELECT pqrun.enqueue('t', priority => 0) AS id;   -- 3
SELECT pqrun.enqueue('t', priority => 5) AS id;   -- 4
SELECT pqrun.enqueue('t', priority => -1) AS id;  -- 5
SELECT pqrun.enqueue('t', priority => 10) AS id;  -- 6
SELECT id, priority FROM pqrun.pickup('w1');
SELECT id, priority FROM pqrun.pickup('w1', batch_size => 3);
-- batch_size larger than what is runnable returns what there is.
SELECT id, priority FROM pqrun.pickup('w1', batch_size => 10);
-- 3. RUNNING jobs are never picked again.
SELECT count(*) AS picked FROM pqrun.pickup('w1', batch_size => 10);
SELECT id, status, attempts FROM pqrun.jobs ORDER BY id;

-- 4. The claimed row: RUNNING, attempts + 1, locked_by = worker_id,
-- locked_at = now(), a fresh lease_token; pickup returns the updated row.
SELECT pqrun.enqueue('claim', payload => '{"x": 1}', queue => 'qa', max_attempts => 2) AS id;  -- 7
BEGIN;
SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts, locked_by,
       locked_at = now() AS locked_now, lease_token IS NOT NULL AS has_lease,
       finished_at, duration_ms, result, last_error
  FROM pqrun.pickup('worker-A');
SELECT id, status, attempts, locked_by, locked_at = now() AS locked_now,
       lease_token IS NOT NULL AS has_lease
  FROM pqrun.jobs WHERE id = 7;
COMMIT;
-- The lease in the returned row is the job's current lease.
SELECT lease_token AS pickup_lease FROM pqrun.jobs WHERE id = 7 \gset
SELECT count(*) AS distinct_leases FROM (SELECT DISTINCT lease_token FROM pqrun.jobs) s;
-- Leases are version-4 UUIDs of the RFC 4122 variant, and distinct.
SELECT count(*) FILTER (WHERE lease_token::text !~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$') AS not_v4
  FROM pqrun.jobs WHERE lease_token IS NOT NULL;
SELECT count(DISTINCT t) AS distinct_of_100000 FROM (SELECT pqrun._lease_token() AS t FROM generate_series(1, 100000)) s;
-- A job picked a second time (after a retry) gets attempts 2 and a new lease.
SELECT pqrun.mark_error(7, 'first try failed', retry_after => '0');
SELECT id, attempts, locked_by, lease_token <> :'pickup_lease' AS new_lease
  FROM pqrun.pickup('worker-B');

-- 5. Filters: job_types and queues (NULL = any, several values = any of them).
SELECT pqrun.enqueue('alpha', queue => 'q1') AS id;  -- 8
SELECT pqrun.enqueue('beta', queue => 'q1') AS id;   -- 9
SELECT pqrun.enqueue('alpha', queue => 'q2') AS id;  -- 10
SELECT pqrun.enqueue('gamma', queue => 'q2') AS id;  -- 11
SELECT pqrun.enqueue('beta', queue => 'q3') AS id;   -- 12
SELECT id, job_type, queue FROM pqrun.pickup('w', job_types => ARRAY['gamma']);
SELECT id, job_type, queue FROM pqrun.pickup('w', queues => ARRAY['q3']);
SELECT id, job_type, queue FROM pqrun.pickup('w', job_types => ARRAY['alpha'], queues => ARRAY['q2']);
SELECT id, job_type, queue FROM pqrun.pickup('w', job_types => ARRAY['alpha'], queues => ARRAY['q3']);
SELECT id, job_type, queue FROM pqrun.pickup('w', job_types => ARRAY['beta', 'alpha'], queues => NULL, batch_size => 5);
SELECT id, job_type, queue FROM pqrun.pickup('w', job_types => ARRAY['nope']);
SELECT count(*) AS ready FROM pqrun.jobs WHERE status = 'READY';

-- 6. A delayed job is READY but not picked until its run_after passes.
SELECT pqrun.enqueue('delayed', run_after => now() + interval '1 hour') AS id;  -- 13
SELECT pqrun.enqueue('delayed', run_after => now() + interval '2 hours', priority => 99) AS id;  -- 14
SELECT id, status, run_after > now() AS in_future FROM pqrun.jobs WHERE job_type = 'delayed' ORDER BY id;
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['delayed']);
SELECT count(*) AS picked FROM pqrun.pickup('w', job_types => ARRAY['delayed'], wait => '10 ms');
-- Make job 13 due by moving its run_after into the past (direct manipulation
-- of the internal table pqrun.job_live, standing in for the passing of time;
-- in the same transaction as the pickup, so that the background worker
-- cannot be half-way through promoting it when pickup looks).
BEGIN;
UPDATE pqrun.job_live SET run_after = now() - interval '1 second' WHERE id = 13;
SELECT id, status, attempts FROM pqrun.pickup('w', job_types => ARRAY['delayed'], batch_size => 5);
COMMIT;
SELECT id, status, attempts FROM pqrun.jobs WHERE job_type = 'delayed' ORDER BY id;
-- A job enqueued with a run_after already in the past is runnable at once.
SELECT pqrun.enqueue('past', run_after => now() - interval '1 day') AS id;  -- 15
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['past']);

-- 7. Among due jobs the order is still priority DESC, id ASC, delayed or not:
-- job 16 falls due (for real: pickups skip promoting until the earliest
-- delayed job is due) and outranks 17 by id. The row lock keeps the
-- background worker from promoting it first.
SELECT pqrun.enqueue('mix', run_after => clock_timestamp() + interval '1 second', priority => 1) AS id;  -- 16
SELECT pqrun.enqueue('mix', priority => 1) AS id;  -- 17
SELECT pqrun.enqueue('mix', priority => 0) AS id;  -- 18
BEGIN;
SELECT id FROM pqrun.job_live WHERE id = 16 AND delayed FOR UPDATE;  -- internal
SELECT pg_sleep(1.2);
SELECT id, priority FROM pqrun.pickup('w', job_types => ARRAY['mix'], batch_size => 2);
COMMIT;
SELECT id, priority FROM pqrun.pickup('w', job_types => ARRAY['mix'], batch_size => 2);

-- 8. A job enqueued and picked in the same transaction works; a pickup in
-- a transaction that rolls back leaves the job READY with attempts 0.
SELECT pqrun.enqueue('rb') AS id;  -- 19
BEGIN;
SELECT id, status, attempts FROM pqrun.pickup('w', job_types => ARRAY['rb']);
ROLLBACK;
SELECT id, status, attempts, locked_by, lease_token FROM pqrun.jobs WHERE id = 19;
BEGIN;
SELECT pqrun.enqueue('same-tx') AS id;  -- 20
SELECT id, status, attempts FROM pqrun.pickup('w', job_types => ARRAY['same-tx']);
COMMIT;

-- 9. Long poll: with a runnable job, pickup returns at once even with a
-- long wait (the statement_timeout only guards against a hang here) ...
SELECT pqrun.enqueue('poll') AS id;  -- 21
SET statement_timeout = '20s';
SELECT id, status FROM pqrun.pickup('w', job_types => ARRAY['poll'], wait => '1 hour');
-- ... and with nothing runnable it honours statement_timeout.
SET statement_timeout = '100ms';
SELECT id FROM pqrun.pickup('w', job_types => ARRAY['poll'], wait => '1 hour');
RESET statement_timeout;

-- The history shows one running attempt per RUNNING job.
SELECT job_id, attempt, worker_id, outcome FROM pqrun.job_attempts ORDER BY job_id, attempt;

-- 10. pickup_from: one queue, which Citus delegates a call by (docs/citus.md); the job-id calls name their job's queue the same
-- way, and a job of another queue is refused as an unknown one (P0002)
-- without a change.
SELECT pqrun.enqueue('from', queue => 'qa', priority => 1) AS qa1 \gset
SELECT pqrun.enqueue('from', queue => 'qb') AS qb1 \gset
SELECT pqrun.enqueue('from', queue => 'qa') AS qa2 \gset
SELECT id = :qa1 AS first_of_qa, queue, status FROM pqrun.pickup_from('w', 'qa');
SELECT count(*) AS none_of_this_type FROM pqrun.pickup_from('w', 'qb', job_types => ARRAY['other']);
SELECT id = :qb1 AS the_one_of_qb, queue FROM pqrun.pickup_from('w', 'qb', batch_size => 5, wait => '0');
SELECT pqrun.mark_done(:qa1, queue => 'qb');
SELECT pqrun.mark_error(:qa1, 'no', queue => 'qb');
SELECT pqrun.heartbeat(:qa1, queue => 'qb');
SELECT pqrun.release(:qa1, queue => 'qb');
SELECT pqrun.snooze(:qa1, '1 s', queue => 'qb');
SELECT pqrun.cancel(:qa1, queue => 'qb');
SELECT pqrun.mark_done_batch(ARRAY[:qa1, :qb1], queue => 'qb');
SELECT status FROM pqrun.jobs WHERE id IN (:qa1, :qb1) ORDER BY id;
SELECT pqrun.heartbeat(:qa1, queue => 'qa');
SELECT pqrun.mark_done(:qa1, queue => 'qa');
SELECT pqrun.mark_done_batch(ARRAY[:qb1], queue => 'qb');
SELECT id = :qa2 AS second_of_qa FROM pqrun.pickup_from('w', 'qa');
SELECT pqrun.mark_error(:qa2, 'no', terminal => true, queue => 'qa');
SELECT pqrun.retry(:qa2, queue => 'qb');
SELECT pqrun.retry(:qa2, queue => 'qa');
SELECT pqrun.cancel(:qa2, queue => 'qa');
SELECT pqrun.mark_done(-1, queue => 'qa');
SELECT id, status FROM pqrun.jobs WHERE id IN (:qa1, :qb1, :qa2) ORDER BY id;
SELECT * FROM pqrun.pickup_from('w', NULL);
SELECT * FROM pqrun.pickup_from('w', 'qa', batch_size => 0);
