-- bulk: retry_jobs and cancel_jobs act on every job a filter matches, in
-- batches that each commit (so they run at top level, as psql runs this
-- file), as their caller, through retry() and cancel().
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'
\set VERBOSITY terse

-- Jobs in two queues: 10 READY in "mail" (payload n = 1..10), 4 in "sms".
SELECT count(pqrun.enqueue('send', jsonb_build_object('n', g), queue => 'mail')) FROM generate_series(1, 10) g;
SELECT count(pqrun.enqueue('text', jsonb_build_object('n', g), queue => 'sms')) FROM generate_series(1, 4) g;

-- 1. Arguments are checked first (22023), inside a transaction block or not.
CALL pqrun.cancel_jobs(statuses => '{DONE}');
CALL pqrun.cancel_jobs(statuses => '{}');
CALL pqrun.retry_jobs(statuses => '{FAILED,NULL}');
CALL pqrun.retry_jobs(batch_size => 0);
CALL pqrun.cancel_jobs(batch_size => 10001);

-- 2. Inside a transaction block, a batch found ends in 2D000: nothing changes.
BEGIN;
CALL pqrun.cancel_jobs(queue => 'mail');
ROLLBACK;
SELECT queue, status, count(*) FROM pqrun.jobs GROUP BY 1, 2 ORDER BY 1, 2;
-- Finding nothing, it commits nothing and may run there.
BEGIN;
CALL pqrun.cancel_jobs(queue => 'no-such-queue');
ROLLBACK;

-- 3. Cancel by queue and payload, 3 jobs a batch: each batch its own
-- transaction (the cancelled rows of job_done have as many distinct xmin).
CALL pqrun.cancel_jobs(queue => 'mail', payload_contains => '{"n": 2}');
CALL pqrun.cancel_jobs(queue => 'mail', job_type => 'send', reason => 'Mail server retired', batch_size => 3);
SELECT queue, status, count(*), count(DISTINCT xmin::text) AS transactions
  FROM pqrun.job_done GROUP BY 1, 2 ORDER BY 1, 2;
SELECT DISTINCT last_error FROM pqrun.jobs WHERE queue = 'mail' ORDER BY 1;
-- Time range: created before now() matches every job, created after none.
CALL pqrun.cancel_jobs(queue => 'sms', created_after => now() + interval '1 hour');

-- 4. RUNNING jobs only when asked; their holder gets 55000 from its next call.
SELECT count(*) AS claimed FROM pqrun.pickup('w1', queues => '{sms}', batch_size => 2);
CALL pqrun.cancel_jobs(queue => 'sms');
SELECT status, count(*) FROM pqrun.jobs WHERE queue = 'sms' GROUP BY 1 ORDER BY 1;
CALL pqrun.cancel_jobs(queue => 'sms', statuses => '{RUNNING}');
SELECT status, count(*) FROM pqrun.jobs WHERE queue = 'sms' GROUP BY 1 ORDER BY 1;

-- 5. Retry by error text (case-insensitive), type and finish time.
SELECT count(pqrun.enqueue('charge', jsonb_build_object('n', g), queue => 'pay', max_attempts => 1))
  FROM generate_series(1, 6) g;
SELECT count(pqrun.mark_error(id, CASE WHEN (payload->>'n')::int % 2 = 0 THEN 'Card DECLINED' ELSE 'timeout' END))
  FROM pqrun.pickup('w2', queues => '{pay}', batch_size => 10);
SELECT status, last_error, count(*) FROM pqrun.jobs WHERE queue = 'pay' GROUP BY 1, 2 ORDER BY 1, 2;
CALL pqrun.retry_jobs(queue => 'pay', error_contains => 'declined', batch_size => 2);
CALL pqrun.retry_jobs(queue => 'pay', finished_before => now() - interval '1 hour');
CALL pqrun.retry_jobs(queue => 'pay', statuses => '{FAILED}', finished_after => now() - interval '1 hour');
SELECT status, count(*) FROM pqrun.jobs WHERE queue = 'pay' GROUP BY 1 ORDER BY 1;

-- 6. A job whose dedupe_key another unfinished job holds stays where it is;
-- the others are retried.
SELECT pqrun.cancel(pqrun.enqueue('once', dedupe_key => 'k1', queue => 'dedupe')) AS cancelled;
SELECT pqrun.enqueue('once', dedupe_key => 'k1', queue => 'dedupe') IS NOT NULL AS second_holds_the_key;
SELECT pqrun.cancel(pqrun.enqueue('once', dedupe_key => 'k2', queue => 'dedupe')) AS cancelled;
CALL pqrun.retry_jobs(queue => 'dedupe');
SELECT dedupe_key, status, count(*) FROM pqrun.jobs WHERE queue = 'dedupe' GROUP BY 1, 2 ORDER BY 1, 2;

-- 7. As an operator (grant_operator), not as a monitor or a worker.
SET client_min_messages = warning;
DROP ROLE IF EXISTS bulk_operator;
DROP ROLE IF EXISTS bulk_monitor;
RESET client_min_messages;
CREATE ROLE bulk_operator;
CREATE ROLE bulk_monitor;
SELECT pqrun.grant_operator('bulk_operator');
SELECT pqrun.grant_monitor('bulk_monitor');
SET ROLE bulk_monitor;
CALL pqrun.cancel_jobs(queue => 'pay');
RESET ROLE;
SET ROLE bulk_operator;
CALL pqrun.cancel_jobs(queue => 'pay');
CALL pqrun.retry_jobs(queue => 'pay', statuses => '{CANCELLED}');
RESET ROLE;
SELECT status, count(*) FROM pqrun.jobs WHERE queue = 'pay' GROUP BY 1 ORDER BY 1;
SET client_min_messages = warning;
DROP EXTENSION pqrun CASCADE;
RESET client_min_messages;
DROP ROLE bulk_operator;
DROP ROLE bulk_monitor;
CREATE EXTENSION pqrun;
