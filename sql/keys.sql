-- keys: concurrency keys (0.10.0, docs/flow-control.md): a job may carry
-- a key (a tenant, a customer); a limit per key bounds how many jobs of
-- each key run at once, and pickups rotate among the keys that have room.
-- Pickups here run in one session, each in its own transaction unless said
-- otherwise, so the rotation starts where this session's last claim left.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'
\set controls 'SELECT queue, concurrency_key, keyed, max_running, max_running_per_key, running, ready, busiest_key_running FROM pqrun.queue_controls ORDER BY queue, concurrency_key NULLS FIRST;'

-- 1. Bad input: 22023, nothing changes.
\set VERBOSITY sqlstate
SELECT pqrun.enqueue('a', concurrency_key => '');
SELECT pqrun.enqueue('a', concurrency_key => repeat('k', 1001));
SELECT pqrun.enqueue_batch('[{"job_type": "a", "concurrency_key": ""}]');
SELECT pqrun.enqueue_batch('[{"job_type": "a", "concurrency_key": 7}]');
SELECT pqrun.set_key_limit(NULL, 1);
SELECT pqrun.set_key_limit('', 1);
SELECT pqrun.set_key_limit('q', -1);
SELECT pqrun.set_key_limit('q', 10001);
SELECT pqrun.set_key_limit('q', 1, '');
SELECT pqrun.set_key_limit('q', 1, repeat('k', 1001));
\set VERBOSITY default
SELECT count(*) AS controls FROM pqrun.queue_control;
SELECT count(*) AS jobs FROM pqrun.jobs;

-- 2. The first keyed job of a queue marks it keyed (its pickups walk its
-- lanes from then on); the key is the job's, in pqrun.jobs and in what
-- pickup returns.
SELECT count(pqrun.enqueue('a', queue => 'rr', concurrency_key => 'k1')) FROM generate_series(1, 4);
SELECT count(pqrun.enqueue('a', queue => 'rr', concurrency_key => 'k2')) FROM generate_series(1, 2);
SELECT count(*) FROM pqrun.enqueue_batch('[{"job_type": "a", "queue": "rr", "concurrency_key": "k3"}]');
:controls

-- 3. Round robin: one job per key in turn, each key's in pickup order
-- (priority, then id), from the key after the one this session claimed
-- from last. Rows come in the order they were claimed.
SELECT id, concurrency_key FROM pqrun.pickup('w', queues => ARRAY['rr'], batch_size => 5);
SELECT id, concurrency_key FROM pqrun.pickup('w', queues => ARRAY['rr'], batch_size => 1);
SELECT id, concurrency_key FROM pqrun.pickup('w', queues => ARRAY['rr'], batch_size => 5);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rr';
-- Within a key, pickup order holds past the jobs already claimed (a
-- session starts a lane's scan past its claimed head): a job of higher
-- priority enqueued later, and one given back, come first.
SELECT count(pqrun.enqueue('a', queue => 'po', concurrency_key => 'x')) FROM generate_series(1, 3);
SELECT id, lease_token AS lease FROM pqrun.pickup('w', queues => ARRAY['po']) \gset
SELECT id - :id AS second FROM pqrun.pickup('w', queues => ARRAY['po']);
SELECT pqrun.enqueue('a', queue => 'po', concurrency_key => 'x', priority => 5) - :id AS urgent;
SELECT id - :id AS next, priority FROM pqrun.pickup('w', queues => ARRAY['po']);
SELECT pqrun.release(:id, :'lease');
SELECT id - :id AS next, priority FROM pqrun.pickup('w', queues => ARRAY['po']);
SELECT id - :id AS next, priority FROM pqrun.pickup('w', queues => ARRAY['po']);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['po']);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'po';

-- 4. A limit per key: no key runs more than its limit, whatever the batch
-- size; a key's own limit replaces it for that key; jobs without a key are
-- not limited by it.
SELECT count(pqrun.enqueue('a', queue => 'lim', concurrency_key => k)) FROM unnest(ARRAY['a', 'a', 'a', 'b', 'b', 'b', 'c']) k;
SELECT count(pqrun.enqueue('a', queue => 'lim')) FROM generate_series(1, 3);
SELECT pqrun.set_key_limit('lim', 1);
SELECT pqrun.set_key_limit('lim', 2, 'b');
SELECT concurrency_key, count(*) FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20) GROUP BY 1 ORDER BY 1;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20);
:controls
-- Each job that ends frees its key's place.
SELECT pqrun.mark_done(min(id)) FROM pqrun.job_live WHERE status = 'RUNNING' AND concurrency_key = 'a';
SELECT id, concurrency_key FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20);
-- A claim rolled back, also to a savepoint, gives its place back.
SELECT pqrun.mark_done(min(id)) FROM pqrun.job_live WHERE status = 'RUNNING' AND concurrency_key = 'b';
BEGIN;
SAVEPOINT s;
SELECT concurrency_key FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20);
ROLLBACK TO s;
SELECT concurrency_key FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20);
COMMIT;
-- A queue-wide limit still binds keyed and unkeyed jobs together.
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'lim' AND status = 'RUNNING';
SELECT pqrun.set_key_limit('lim', 5);
SELECT pqrun.set_concurrency_limit('lim', 1);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20);
SELECT pqrun.set_concurrency_limit('lim', NULL);
-- Removing the limits leaves the queue keyed.
SELECT pqrun.set_key_limit('lim', NULL);
SELECT pqrun.set_key_limit('lim', NULL, 'b');
:controls
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['lim'], batch_size => 20);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'lim';

-- 5. A paused keyed queue hands out nothing; await_jobs sees work only in
-- a key with room.
SELECT count(pqrun.enqueue('a', queue => 'p', concurrency_key => 'x')) FROM generate_series(1, 2);
SELECT pqrun.pause_queue('p');
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['p']);
CALL pqrun.await_jobs(queues => ARRAY['p'], wait => '0');
SELECT pqrun.resume_queue('p');
SELECT pqrun.set_key_limit('p', 1);
CALL pqrun.await_jobs(queues => ARRAY['p'], wait => '0');
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => ARRAY['p']);
CALL pqrun.await_jobs(queues => ARRAY['p'], wait => '0');
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'p' AND status = 'RUNNING';
CALL pqrun.await_jobs(queues => ARRAY['p'], wait => '0');

-- 6. A delayed keyed job waits for its promotion into its lane; a job
-- that fails and is retried, is cancelled, or is retried from job_done
-- keeps its key.
SELECT pqrun.enqueue('a', queue => 'd', concurrency_key => 'x', run_after => clock_timestamp() + interval '200 ms') AS late \gset
SELECT delayed FROM pqrun.job_live WHERE id = :late;
SELECT pg_sleep(0.3);
SELECT id = :late AS late_claimed FROM pqrun.pickup('w', queues => ARRAY['d']);
SELECT pqrun.mark_error(:late, 'boom', retry_after => '0');
SELECT id = :late AS retried, concurrency_key FROM pqrun.pickup('w', queues => ARRAY['d']);
SELECT pqrun.cancel(:late);
SELECT status, concurrency_key FROM pqrun.jobs WHERE id = :late;
SELECT pqrun.retry(:late);
SELECT status, concurrency_key FROM pqrun.jobs WHERE id = :late;
SELECT id = :late AS claimed_again FROM pqrun.pickup('w', queues => ARRAY['d']);
SELECT pqrun.mark_done(:late);
SELECT status, concurrency_key FROM pqrun.jobs WHERE id = :late;

-- 7. Keyed jobs are not in the pick index, only in their lanes.
SELECT indexrelid::regclass AS index, pg_get_expr(indpred, indrelid) AS predicate
  FROM pg_index WHERE indrelid = 'pqrun.job_live'::regclass
   AND indexrelid::regclass::text IN ('pqrun.job_live_pick', 'pqrun.job_live_lane') ORDER BY 1;

-- 8. metrics(): the limit of each key and of the keys with their own.
SELECT pqrun.set_key_limit('m', 3);
SELECT pqrun.set_key_limit('m', 1, 'vip');
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') line WHERE line ~ '^pqrun_key_' ORDER BY 1;

-- 9. A pickup that found the pick index empty (nothing there for anyone)
-- does not look there again until a job becomes READY somewhere: a job
-- without a key enqueued meanwhile is claimed by the next pickup.
SELECT count(*) AS cancelled FROM (SELECT pqrun.cancel(id) FROM pqrun.job_live WHERE status <> 'RUNNING') s;
SELECT count(*) AS finished FROM (SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE status = 'RUNNING') s;
SELECT count(pqrun.enqueue('a', queue => 'mix', concurrency_key => 'x')) FROM generate_series(1, 4);
SELECT concurrency_key FROM pqrun.pickup('w');
SELECT concurrency_key FROM pqrun.pickup('w');
SELECT concurrency_key FROM pqrun.pickup('w');
SELECT pqrun.enqueue('a', queue => 'mix') > 0 AS unkeyed;
SELECT count(*) FILTER (WHERE concurrency_key IS NULL) AS unkeyed_claimed FROM pqrun.pickup('w', batch_size => 2);
