-- enqueue: defaults, every argument, delayed jobs, dedupe, transactional
-- enqueue, and enqueue_batch.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- 1. Defaults: READY, priority 0, attempts 0, max_attempts 5, queue
-- 'default', payload '{}', run_after = now(), nothing else set.
BEGIN;
SELECT pqrun.enqueue('email') AS id;
SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
       run_after = now() AS run_after_now, timeout_seconds, locked_at, locked_by,
       lease_token, dedupe_key, fifo_key, depends_on, last_error, finished_at,
       duration_ms, result, created_at = now() AS created_now, updated_at = now() AS updated_now
  FROM pqrun.jobs ORDER BY id;
COMMIT;

-- 2. Every argument is stored as given.
SELECT pqrun.enqueue(job_type => 'report', payload => '{"user": 42, "tags": ["a", "b"]}',
                     priority => 7, run_after => '2001-02-03 04:05:06+00', max_attempts => 3,
                     timeout_seconds => 90, dedupe_key => 'report-42', queue => 'reports',
                     depends_on => ARRAY[1]::bigint[], fifo_key => 'user-42') AS id;
SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
       run_after = '2001-02-03 04:05:06+00' AS run_after_given, timeout_seconds,
       dedupe_key, fifo_key, depends_on, last_error, finished_at
  FROM pqrun.jobs WHERE id = 2;
-- (BLOCKED: it depends on job 1, which is not DONE.)

-- Positional arguments, in the contract's order.
SELECT pqrun.enqueue('positional', '{"p": 1}', -3, now() - interval '1 hour', 2, 10, 'pos-key', 'q2') AS id;
SELECT id, queue, job_type, payload, status, priority, max_attempts, timeout_seconds, dedupe_key,
       run_after < now() AS run_after_past
  FROM pqrun.jobs WHERE id = 3;

-- A payload can be any JSON value.
SELECT pqrun.enqueue('any-json', payload => '[1, "two", null]') AS id;
SELECT pqrun.enqueue('any-json', payload => '"just a string"') AS id;
SELECT id, payload FROM pqrun.jobs WHERE job_type = 'any-json' ORDER BY id;

-- 3. Delayed: a future run_after keeps the job READY but not runnable.
SELECT pqrun.enqueue('later', run_after => now() + interval '1 hour') AS id;
SELECT id, status, run_after > now() AS in_future FROM pqrun.jobs WHERE id = 6;
SELECT id FROM pqrun.pickup('w1', job_types => ARRAY['later']);
SELECT id, status, attempts FROM pqrun.jobs WHERE id = 6;

-- 4. Dedupe: while a job holding the key is READY, RUNNING or BLOCKED, the
-- same key answers that job's id, creates nothing and changes nothing.
SELECT pqrun.enqueue('sync', payload => '{"v": 1}', dedupe_key => 'sync-1') AS id;
SELECT count(*) AS jobs FROM pqrun.jobs;
SELECT pqrun.enqueue('sync', payload => '{"v": 2}', priority => 9, dedupe_key => 'sync-1') AS same_id;
SELECT pqrun.enqueue('other-type', queue => 'elsewhere', dedupe_key => 'sync-1') AS same_id;
SELECT count(*) AS jobs FROM pqrun.jobs;
SELECT id, job_type, queue, payload, priority, status FROM pqrun.jobs WHERE dedupe_key = 'sync-1' ORDER BY id;
-- RUNNING holder
SELECT id, status FROM pqrun.pickup('w1', job_types => ARRAY['sync']);
SELECT pqrun.enqueue('sync', dedupe_key => 'sync-1') AS same_id;
SELECT count(*) AS jobs FROM pqrun.jobs;
-- BLOCKED holder (job 2 above holds 'report-42')
SELECT pqrun.enqueue('report', dedupe_key => 'report-42') AS same_id;
SELECT count(*) AS jobs FROM pqrun.jobs;

-- After the holder is DONE, the key is free again. (A dedupe hit may use up
-- a sequence value, so the new ids are kept in psql variables.)
SELECT pqrun.mark_done(7);
SELECT pqrun.enqueue('sync', dedupe_key => 'sync-1') AS after_done \gset
SELECT :after_done > 7 AS new_job;
SELECT pqrun.enqueue('sync', dedupe_key => 'sync-1') = :after_done AS same_again;
-- After FAILED: free again.
SELECT id = :after_done AS picked FROM pqrun.pickup('w1', job_types => ARRAY['sync']);
SELECT pqrun.mark_error(:after_done, 'boom', terminal => true);
SELECT pqrun.enqueue('sync', dedupe_key => 'sync-1') AS after_failed \gset
SELECT :after_failed > :after_done AS new_job;
-- After CANCELLED: free again.
SELECT pqrun.cancel(:after_failed);
SELECT pqrun.enqueue('sync', dedupe_key => 'sync-1') AS after_cancelled \gset
SELECT :after_cancelled > :after_failed AS new_job;
SELECT status, count(*) FROM pqrun.jobs WHERE dedupe_key = 'sync-1' GROUP BY status ORDER BY status;
-- Different keys never collide; NULL keys never dedupe.
SELECT pqrun.enqueue('sync', dedupe_key => 'sync-2') <> :after_cancelled AS different;
SELECT pqrun.enqueue('nokey') <> pqrun.enqueue('nokey') AS different;
SELECT job_type, dedupe_key, count(*) FROM pqrun.jobs
 WHERE job_type IN ('sync', 'nokey') GROUP BY job_type, dedupe_key ORDER BY job_type, dedupe_key;

-- 5. Enqueue is transactional: a rolled-back enqueue never existed (its id
-- is simply skipped, as sequences are not transactional).
SELECT count(*) AS jobs FROM pqrun.jobs;
BEGIN;
SELECT pqrun.enqueue('rolled-back', dedupe_key => 'rb') IS NOT NULL AS enqueued;
SELECT count(*) AS jobs_inside FROM pqrun.jobs;
ROLLBACK;
SELECT count(*) AS jobs FROM pqrun.jobs;
SELECT count(*) AS rolled_back FROM pqrun.jobs WHERE job_type = 'rolled-back';
-- ... and its dedupe key was never taken.
SELECT pqrun.enqueue('rolled-back', dedupe_key => 'rb') IS NOT NULL AS enqueued;
SELECT job_type, status FROM pqrun.jobs WHERE dedupe_key = 'rb';

-- 6. enqueue_batch: one id per element, in input order, with enqueue's
-- defaults for absent keys and for JSON null.
TRUNCATE pqrun.job_live, pqrun.job_done, pqrun.attempt_log, pqrun.job_dep;
SELECT setval('pqrun.job_id_seq', 100, true);  -- internal: start batch ids at 101
SELECT n, id FROM pqrun.enqueue_batch('[
  {"job_type": "b1"},
  {"job_type": "b2", "priority": 5},
  {"job_type": "b3", "payload": null, "priority": null, "run_after": null,
   "max_attempts": null, "timeout_seconds": null, "dedupe_key": null,
   "queue": null, "depends_on": null, "fifo_key": null}
]') WITH ORDINALITY AS t(id, n) ORDER BY n;
BEGIN;
SELECT n, id FROM pqrun.enqueue_batch('[{"job_type": "b4"}]') WITH ORDINALITY AS t(id, n) ORDER BY n;
SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
       run_after <= now() AS runnable_now, timeout_seconds, dedupe_key, fifo_key, depends_on
  FROM pqrun.jobs ORDER BY id;
COMMIT;

-- Every key is honoured.
SELECT n, id FROM pqrun.enqueue_batch('[
  {"job_type": "full", "payload": {"k": [1, 2]}, "priority": -2,
   "run_after": "2030-01-01 00:00:00+00", "max_attempts": 9, "timeout_seconds": 30,
   "dedupe_key": "full-1", "queue": "batchq", "depends_on": [101, 102], "fifo_key": "g1"}
]') WITH ORDINALITY AS t(id, n) ORDER BY n;
SELECT id, queue, job_type, payload, status, priority, max_attempts,
       run_after = '2030-01-01 00:00:00+00' AS run_after_given, timeout_seconds,
       dedupe_key, fifo_key, depends_on
  FROM pqrun.jobs WHERE id = 105;

-- Dedupe inside one batch and against existing jobs: repeated keys answer
-- the first job's id and create nothing.
SELECT n, id FROM pqrun.enqueue_batch('[
  {"job_type": "d"},
  {"job_type": "d", "dedupe_key": "k1"},
  {"job_type": "d", "dedupe_key": "k2"},
  {"job_type": "d", "dedupe_key": "k1", "priority": 100},
  {"job_type": "d", "dedupe_key": "full-1"}
]') WITH ORDINALITY AS t(id, n) ORDER BY n;
SELECT id, job_type, dedupe_key, priority FROM pqrun.jobs WHERE id > 105 ORDER BY id;

-- depends_on and fifo_key inside a batch: a later element may depend on an
-- earlier one of the same batch (id 201, the sequence being set by hand);
-- fifo members after the first are BLOCKED.
SELECT setval('pqrun.job_id_seq', 200, true);  -- internal
SELECT n, id FROM pqrun.enqueue_batch('[
  {"job_type": "parent"},
  {"job_type": "child", "depends_on": [201]},
  {"job_type": "child2", "depends_on": [201, 106]},
  {"job_type": "f", "fifo_key": "bf"},
  {"job_type": "f", "fifo_key": "bf"}
]') WITH ORDINALITY AS t(id, n) ORDER BY n;
SELECT id, job_type, status, depends_on, fifo_key FROM pqrun.jobs WHERE id > 200 ORDER BY id;

-- An empty array enqueues nothing.
SELECT count(*) AS ids FROM pqrun.enqueue_batch('[]');

-- A batch is one statement: an error in any element enqueues none of them.
SELECT count(*) AS jobs FROM pqrun.jobs;
\set VERBOSITY default
SELECT * FROM pqrun.enqueue_batch('[{"job_type": "ok"}, {"job_type": ""}]');
SELECT count(*) AS jobs FROM pqrun.jobs;

-- A batch in a rolled-back transaction leaves nothing.
BEGIN;
SELECT count(*) AS ids FROM pqrun.enqueue_batch('[{"job_type": "x"}, {"job_type": "y"}]');
ROLLBACK;
SELECT count(*) AS jobs FROM pqrun.jobs;

-- A batch longer than one INSERT run (1,000 plain elements): ids follow
-- element order across runs and around the elements written one by one,
-- and a dedupe key repeated across runs still answers the first job.
SELECT setval('pqrun.job_id_seq', 1000, true);  -- internal
WITH ids AS (
  SELECT n, id FROM pqrun.enqueue_batch((
    SELECT jsonb_agg(CASE
             WHEN i IN (1, 1500) THEN jsonb_build_object('job_type', 'long', 'dedupe_key', 'across-runs')
             WHEN i = 1200 THEN jsonb_build_object('job_type', 'long', 'fifo_key', 'lf')
             WHEN i = 2400 THEN jsonb_build_object('job_type', 'long', 'run_after', '2030-01-01 00:00:00+00')
             ELSE jsonb_build_object('job_type', 'long', 'payload', jsonb_build_object('i', i)) END ORDER BY i)
      FROM generate_series(1, 2500) AS i)) WITH ORDINALITY AS t(id, n))
SELECT count(*) AS ids,
       count(DISTINCT id) AS distinct_ids,
       bool_and(id = (SELECT id FROM ids WHERE n = 1)) FILTER (WHERE n = 1500) AS dedupe_across_runs,
       bool_and(id > lag_id) FILTER (WHERE n <> 1500 AND n > 1) AS increasing
  FROM (SELECT n, id, lag(id) OVER (ORDER BY n) AS lag_id FROM ids) s;
SELECT count(*) AS jobs,
       count(*) FILTER (WHERE status = 'READY' AND run_after > now()) AS delayed,
       count(*) FILTER (WHERE fifo_key = 'lf') AS fifo,
       count(*) FILTER (WHERE payload ? 'i') AS with_payload
  FROM pqrun.jobs WHERE job_type = 'long';
