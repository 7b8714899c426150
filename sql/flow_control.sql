-- flow_control: pausing a queue, limiting how many of its jobs (or of a job
-- type in it) run at once and how fast they are claimed (0.9.0,
-- docs/flow-control.md). A limit counts
-- the jobs claimed and not yet ended, whoever holds them; pickups here run
-- in one session, each in its own transaction unless said otherwise.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'
\set controls 'SELECT queue, job_type, paused, max_running, running, ready FROM pqrun.queue_controls ORDER BY queue, job_type NULLS FIRST;'

-- 1. Bad input: 22023, nothing changes.
\set VERBOSITY sqlstate
SELECT pqrun.set_concurrency_limit(NULL, 1);
SELECT pqrun.set_concurrency_limit('', 1);
SELECT pqrun.set_concurrency_limit('q', -1);
SELECT pqrun.set_concurrency_limit('q', 10001);
SELECT pqrun.set_concurrency_limit('q', 1, '');
SELECT pqrun.pause_queue(NULL);
SELECT pqrun.pause_queue('');
SELECT pqrun.resume_queue(NULL);
SELECT pqrun.resume_queue('');
\set VERBOSITY default
SELECT count(*) AS controls FROM pqrun.queue_control;

-- 2. A queue's limit: a pickup never claims past it, whatever its batch
-- size; each job that ends frees its place.
SELECT count(pqrun.enqueue('a', queue => 'lim')) FROM generate_series(1, 5);
SELECT pqrun.set_concurrency_limit('lim', 2);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
:controls
SELECT pqrun.mark_done(min(id)) FROM pqrun.job_live WHERE status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
-- A failure that will be retried, a cancel, a release and a snooze end the
-- attempt too.
SELECT pqrun.mark_error(min(id), 'boom', retry_after => '1 hour') FROM pqrun.job_live WHERE status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.cancel(min(id)) FROM pqrun.job_live WHERE status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.release(min(id)) FROM pqrun.job_live WHERE status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.snooze(min(id), '1 hour') FROM pqrun.job_live WHERE status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
:controls
-- Raised, it lets more run at once; removed, the control goes.
SELECT pqrun.mark_error(id, 'later', retry_after => '1 hour') FROM pqrun.job_live WHERE queue = 'lim' AND status = 'RUNNING';
SELECT count(pqrun.enqueue('a', queue => 'lim')) FROM generate_series(1, 4);
SELECT pqrun.set_concurrency_limit('lim', 3);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.set_concurrency_limit('lim', NULL);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS controls FROM pqrun.queue_control;

-- 3. A job type's limit within a queue, beside the queue's own: both hold.
SELECT count(pqrun.enqueue('x', queue => 'typed')) FROM generate_series(1, 3);
SELECT count(pqrun.enqueue('y', queue => 'typed')) FROM generate_series(1, 3);
SELECT pqrun.set_concurrency_limit('typed', 1, 'x');
SELECT job_type, count(*) FROM pqrun.pickup('w', batch_size => 10) GROUP BY 1 ORDER BY 1;
SELECT pqrun.set_concurrency_limit('typed', 2);
SELECT count(pqrun.enqueue('y', queue => 'typed')) FROM generate_series(1, 3);
SELECT count(pqrun.enqueue('x', queue => 'typed')) FROM generate_series(1, 3);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'typed' AND status = 'RUNNING';
SELECT job_type, count(*) FROM pqrun.pickup('w', batch_size => 10) GROUP BY 1 ORDER BY 1;
:controls
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'typed' AND status = 'RUNNING';
SELECT pqrun.set_concurrency_limit('typed', NULL);
SELECT pqrun.set_concurrency_limit('typed', NULL, 'x');
SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', batch_size => 100);

-- 4. A limit set while jobs run counts them (as after a server restart,
-- when the count is rebuilt from the RUNNING rows); 0 lets nothing run.
SELECT count(pqrun.enqueue('a', queue => 'busy')) FROM generate_series(1, 5);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 3);
SELECT pqrun.set_concurrency_limit('busy', 3);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.set_concurrency_limit('busy', 0);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'busy' AND status = 'RUNNING';
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.set_concurrency_limit('busy', NULL);
SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', batch_size => 10);
-- So does a limit added to a queue that has a rate limit (whose count held
-- no places), and one added again after it was removed. On 0.15.0 the
-- pickup after set_concurrency_limit('rated', 2) claimed 2 more: 12 RUNNING
-- under a limit of 2.
SELECT pqrun.set_rate_limit('rated', 1000, 1000);
SELECT count(pqrun.enqueue('a', queue => 'rated')) FROM generate_series(1, 15);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rated}', batch_size => 10);
SELECT pqrun.set_concurrency_limit('rated', 2);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rated}', batch_size => 5);
SELECT pqrun.set_concurrency_limit('rated', NULL);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rated}', batch_size => 2);
SELECT pqrun.set_concurrency_limit('rated', 13);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rated}', batch_size => 5);
SELECT running, max_running FROM pqrun.queue_controls WHERE queue = 'rated';
SELECT pqrun.set_concurrency_limit('rated', NULL);
SELECT pqrun.set_rate_limit('rated', NULL);
SELECT count(pqrun.mark_done(id)) AS done FROM pqrun.job_live WHERE queue = 'rated' AND status = 'RUNNING';
SELECT count(pqrun.mark_done(id)) AS done FROM pqrun.pickup('w', queues => '{rated}', batch_size => 10);

-- 5. A claim that rolls back, or whose savepoint does, gives its place back.
SELECT count(pqrun.enqueue('a', queue => 'rb')) FROM generate_series(1, 3);
SELECT pqrun.set_concurrency_limit('rb', 1);
BEGIN;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
COMMIT;
-- A place taken in a savepoint that was released stays taken when a later
-- savepoint at the same depth rolls back. Once, the rollback gave back the
-- places of every claim made at that depth, and the limit was exceeded:
--   limit 1; BEGIN; SAVEPOINT a; pickup -> 1 job; RELEASE a;
--   SAVEPOINT b; ROLLBACK TO b; pickup -> a second job.
-- (A waiting pickup looks in savepoints of its own, so two waiting pickups
-- in one transaction did the same.)
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SELECT count(pqrun.enqueue('a', queue => 'rb')) FROM generate_series(1, 4);
BEGIN;
SAVEPOINT a;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
RELEASE SAVEPOINT a;
SAVEPOINT b;
ROLLBACK TO SAVEPOINT b;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
COMMIT;
SELECT count(*) AS running FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
BEGIN;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}', wait => '10 ms');
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}', wait => '10 ms');
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
COMMIT;
SELECT count(*) AS running FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
-- A finish frees its place only when it commits: mark_done_and_pickup under
-- a full limit finishes and claims nothing (the worker's next pickup takes
-- the place), and when it rolls back the job still holds its place.
SELECT count(pqrun.enqueue('a', queue => 'rb')) FROM generate_series(1, 2);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SELECT id AS held FROM pqrun.pickup('w', queues => '{rb}') \gset
BEGIN;
SELECT count(*) AS claimed FROM pqrun.mark_done_and_pickup('w', ARRAY[:held]::bigint[], queues => '{rb}');
ROLLBACK;
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
SELECT count(*) AS claimed FROM pqrun.mark_done_and_pickup('w', ARRAY[:held]::bigint[], queues => '{rb}');
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
-- Every claim path keeps it: claims written at once, REPEATABLE READ, and
-- the SQL statements (a trigger on job_live makes pickups use them).
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SET pqrun.deferred_claims = off;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
RESET pqrun.deferred_claims;
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
COMMIT;
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER noop BEFORE UPDATE ON pqrun.job_live FOR EACH ROW EXECUTE FUNCTION noop();
SELECT count(pqrun.enqueue('a', queue => 'rb')) FROM generate_series(1, 2);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
DROP TRIGGER noop ON pqrun.job_live;
-- A finish in a prepared transaction keeps its place until COMMIT PREPARED,
-- when the job's end takes effect. On 0.15.0 PREPARE gave the place back:
-- the next pickup claimed a job while the finished one still ran.
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SELECT count(pqrun.enqueue('a', queue => 'rb')) FROM generate_series(1, 2);
SELECT id AS held FROM pqrun.pickup('w', queues => '{rb}') \gset
BEGIN;
SELECT pqrun.mark_done(:held);
PREPARE TRANSACTION 'rb_done';
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
COMMIT PREPARED 'rb_done';
SELECT pg_sleep(0.05);
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{rb}');
SELECT pqrun.set_concurrency_limit('rb', NULL);
SELECT pqrun.mark_done(id) FROM pqrun.job_live WHERE queue = 'rb' AND status = 'RUNNING';
SELECT pqrun.mark_done(id) FROM pqrun.pickup('w', batch_size => 10);

-- 5b. Rate limits: a token bucket per queue or job type, full at first
-- (burst), refilled at per_second; each claim takes a token, a claim that
-- rolls back gives it back. Bad input: 22023, nothing changes.
\set VERBOSITY sqlstate
SELECT pqrun.set_rate_limit('rate', 0);
SELECT pqrun.set_rate_limit('rate', -1);
SELECT pqrun.set_rate_limit('rate', 'NaN');
SELECT pqrun.set_rate_limit('rate', 'Infinity');
SELECT pqrun.set_rate_limit('rate', 1000001);
SELECT pqrun.set_rate_limit('rate', 1, 0);
SELECT pqrun.set_rate_limit('rate', 1, NULL);
SELECT pqrun.set_rate_limit('rate', 1, 1000001);
SELECT pqrun.set_rate_limit('rate', 1, 1, '');
SELECT pqrun.set_rate_limit(NULL, 1);
\set VERBOSITY default
SELECT count(*) AS controls FROM pqrun.queue_control;
SELECT count(pqrun.enqueue('a', queue => 'rate')) FROM generate_series(1, 10);
SELECT pqrun.set_rate_limit('rate', 0.001, 3);
SELECT queue, job_type, rate, burst, tokens FROM pqrun.queue_controls WHERE queue = 'rate';
BEGIN;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
ROLLBACK;
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 2);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT queue, rate, burst, tokens < 1 AS empty FROM pqrun.queue_controls WHERE queue = 'rate';
-- Per job type, beside the queue's: both hold; removed, the control goes.
SELECT pqrun.set_rate_limit('rate', NULL);
SELECT pqrun.set_rate_limit('rate', 0.001, 2, 'a');
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT pqrun.set_rate_limit('rate', NULL, job_type => 'a');
SELECT count(*) AS claimed FROM pqrun.pickup('w', batch_size => 10);
SELECT count(*) AS controls FROM pqrun.queue_control;
SELECT count(pqrun.mark_done(id)) FROM pqrun.job_live WHERE queue = 'rate';

-- 6. Pause: enqueues go on, pickups take nothing of the queue (asked for or
-- not) and the others' jobs as before; resume lets them again. Each answers
-- whether it changed anything.
SELECT pqrun.pause_queue('held'), pqrun.pause_queue('held');
SELECT count(pqrun.enqueue('a', queue => 'held')) FROM generate_series(1, 2);
SELECT pqrun.enqueue('a', queue => 'free') AS free \gset
SELECT count(*) AS claimed FROM pqrun.pickup('w', queues => '{held}');
SELECT queue FROM pqrun.pickup('w', batch_size => 10);
:controls
SELECT pqrun.resume_queue('held'), pqrun.resume_queue('held');
SELECT queue, count(*) FROM pqrun.pickup('w', batch_size => 10) GROUP BY 1;
SELECT count(*) AS controls FROM pqrun.queue_control;
-- A job type cannot be paused on its own.
\set VERBOSITY sqlstate
INSERT INTO pqrun.queue_control (queue, job_type, paused) VALUES ('held', 'a', true);
\set VERBOSITY default

-- 7. metrics() shows every control.
SELECT pqrun.pause_queue('held');
SELECT pqrun.set_concurrency_limit('lim', 5);
SELECT pqrun.set_concurrency_limit('lim', 1, 'a');
SELECT pqrun.set_rate_limit('lim', 2.5, 5, 'a');
SELECT line FROM regexp_split_to_table(pqrun.metrics(), E'\n') AS line
 WHERE line ~ '^pqrun_(queue_paused|concurrency|rate_limit)';

-- 8. Only the owner, and roles it grants, may set controls; a worker may
-- read them (await_jobs does, as its caller).
CREATE ROLE pqrun_fc_worker;
SELECT pqrun.grant_worker('pqrun_fc_worker');
SET ROLE pqrun_fc_worker;
\set VERBOSITY sqlstate
SELECT pqrun.pause_queue('lim');
SELECT pqrun.resume_queue('held');
SELECT pqrun.set_concurrency_limit('lim', 1);
SELECT pqrun.set_rate_limit('lim', 1);
\set VERBOSITY default
SELECT count(*) AS controls FROM pqrun.queue_control;
RESET ROLE;
DROP OWNED BY pqrun_fc_worker;
DROP ROLE pqrun_fc_worker;
