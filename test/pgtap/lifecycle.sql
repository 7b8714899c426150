-- test/pgtap/lifecycle.sql — state-machine invariants of one job at a time.
--
-- API.md: READY -> RUNNING (pickup: attempts + 1, locked_by, a fresh lease)
-- -> DONE (mark_done: finished_at, duration_ms, result); mark_error retries
-- (READY again, run_after = now() + backoff or retry_after) until attempts
-- run out or the error is terminal (FAILED); retry() replays FAILED and
-- CANCELLED jobs keeping attempts; cancel() finishes unfinished jobs only;
-- dedupe keys are held by unfinished jobs only; dependencies and FIFO groups
-- release or cancel the jobs waiting on them; every attempt leaves one
-- pqrun.job_attempts row. Everything runs in one rolled-back transaction
-- (now() is fixed) on queues of its own, so jobs left by other tests don't count.
BEGIN;
SELECT plan(71);
SET LOCAL pqrun.backoff = '1min,5min,30min,2h,6h';

-- ---- READY -> RUNNING -> DONE ------------------------------------------------
SELECT pqrun.enqueue('life', '{"n": 1}', queue => 'tap_life') AS a \gset
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :a), 'READY', 'a new job is READY');
SELECT results_eq(format($$SELECT attempts, max_attempts, priority, queue, payload, locked_by, lease_token,
	run_after = now(), finished_at, dedupe_key, depends_on FROM pqrun.jobs WHERE id = %s$$, :a),
	$$VALUES (0, 5, 0, 'tap_life', '{"n": 1}'::jsonb, NULL::text, NULL::uuid, true, NULL::timestamptz,
	          NULL::text, NULL::bigint[])$$,
	'it has the documented defaults and no lease');
SELECT is((SELECT count(*) FROM pqrun.job_attempts WHERE job_id = :a), 0::bigint, 'no attempt yet');

SELECT id AS picked, lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_life}') \gset
SELECT is(:picked::bigint, :a::bigint, 'pickup hands out the job');
SELECT results_eq(format($$SELECT status, attempts, locked_by, locked_at = now(), lease_token = %L
	FROM pqrun.jobs WHERE id = %s$$, :'lease', :a),
	$$VALUES ('RUNNING'::pqrun.job_status, 1, 'w1', true, true)$$,
	'the job is RUNNING with attempts + 1, locked_by, locked_at and the lease pickup returned');
SELECT results_eq(format('SELECT attempt, worker_id, outcome FROM pqrun.job_attempts WHERE job_id = %s', :a),
	$$VALUES (1, 'w1', NULL::text)$$, 'the running attempt shows in job_attempts, outcome NULL');
SELECT is((SELECT count(*) FROM pqrun.pickup('w2', queues => '{tap_life}')), 0::bigint,
	'a RUNNING job is not handed out again');
SELECT lives_ok(format('SELECT pqrun.heartbeat(%s, %L)', :a, :'lease'), 'heartbeat with the lease');

SELECT lives_ok(format($$SELECT pqrun.mark_done(%s, '{"ok": true}', %L)$$, :a, :'lease'), 'mark_done with the lease');
SELECT results_eq(format($$SELECT status, attempts, result, finished_at = now(), duration_ms >= 0, locked_by
	FROM pqrun.jobs WHERE id = %s$$, :a),
	$$VALUES ('DONE'::pqrun.job_status, 1, '{"ok": true}'::jsonb, true, true, 'w1')$$,
	'the job is DONE with result, finished_at and duration_ms');
SELECT results_eq(format('SELECT attempt, worker_id, outcome, error FROM pqrun.job_attempts WHERE job_id = %s', :a),
	$$VALUES (1, 'w1', 'done', NULL::text)$$, 'one attempt, outcome done');
SELECT throws_ok(format('SELECT pqrun.mark_done(%s, lease_token => %L)', :a, :'lease'), '55000', NULL,
	'mark_done of a DONE job: 55000');
SELECT throws_ok(format('SELECT pqrun.heartbeat(%s, %L)', :a, :'lease'), '55000', NULL,
	'heartbeat of a DONE job: 55000');
SELECT is(pqrun.cancel(:a), false, 'cancel of a DONE job answers false');
SELECT is(pqrun.retry(:a), false, 'retry of a DONE job answers false');
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :a), 'DONE', 'and they change nothing');
SELECT is((SELECT count(*) FROM pqrun.jobs WHERE id = :a), 1::bigint, 'the job appears once in pqrun.jobs');

-- ---- order and filters -----------------------------------------------------------
SELECT pqrun.enqueue('low', queue => 'tap_life') AS low \gset
SELECT pqrun.enqueue('high', priority => 5, queue => 'tap_life') AS high1 \gset
SELECT pqrun.enqueue('high', priority => 5, queue => 'tap_life') AS high2 \gset
SELECT pqrun.enqueue('later', run_after => now() + interval '1 hour', queue => 'tap_life') AS later \gset
SELECT is((SELECT count(*) FROM pqrun.pickup('w1', job_types => '{nothing}', queues => '{tap_life}')), 0::bigint,
	'job_types filters');
SELECT is((SELECT count(*) FROM pqrun.pickup('w1', queues => '{tap_none}')), 0::bigint, 'queues filters');
SELECT results_eq($$SELECT id FROM pqrun.pickup('w1', queues => '{tap_life}', batch_size => 10)$$,
	format('VALUES (%s::bigint), (%s), (%s)', :high1, :high2, :low),
	'a batch comes in priority DESC, id ASC order, without the delayed job');
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :later), 'READY', 'the delayed job stays READY');
SELECT is((SELECT count(*) FROM pqrun.pickup('w1', queues => '{tap_life}')), 0::bigint,
	'and is not runnable before run_after');
SELECT is(pqrun.cancel(:later, 'not needed'), true, 'cancel of a READY job answers true');
SELECT results_eq(format('SELECT status, last_error, finished_at = now() FROM pqrun.jobs WHERE id = %s', :later),
	$$VALUES ('CANCELLED'::pqrun.job_status, 'not needed', true)$$,
	'it is CANCELLED with the reason in last_error and finished_at set');
SELECT is(pqrun.cancel(:later), false, 'a second cancel answers false');
SELECT is((SELECT count(*) FROM pqrun.job_attempts WHERE job_id = :later), 0::bigint,
	'a job cancelled before it ran has no attempt');
-- finish the picked ones so they don't get in the way
SELECT pqrun.mark_done(id) FROM (VALUES (:high1::bigint), (:high2), (:low)) AS v(id);

-- ---- retries --------------------------------------------------------------------------
SELECT pqrun.enqueue('backoff', queue => 'tap_backoff') AS b \gset
SELECT lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_backoff}') \gset
SELECT is(pqrun.mark_error(:b, 'first', lease_token => :'lease'), 'READY', 'mark_error with attempts left: READY');
SELECT results_eq(format($$SELECT status, attempts, last_error, run_after = now() + interval '1 minute',
	locked_by, lease_token FROM pqrun.jobs WHERE id = %s$$, :b),
	$$VALUES ('READY'::pqrun.job_status, 1, 'first', true, NULL::text, NULL::uuid)$$,
	'it waits the first backoff step (1 min), attempts kept, error stored, lease gone');
SELECT is((SELECT count(*) FROM pqrun.pickup('w1', queues => '{tap_backoff}')), 0::bigint,
	'it is not runnable during the backoff');
SELECT throws_ok(format('SELECT pqrun.mark_done(%s, lease_token => %L)', :b, :'lease'), '55000', NULL,
	'the old lease is dead after mark_error');

SELECT pqrun.enqueue('flaky', max_attempts => 2, queue => 'tap_life') AS f \gset
SELECT lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_life}') \gset
SELECT is(pqrun.mark_error(:f, 'first', lease_token => :'lease', retry_after => '0'), 'READY',
	'mark_error with retry_after 0: READY and due at once');
SELECT lease_token AS lease2, attempts AS att FROM pqrun.pickup('w2', queues => '{tap_life}') \gset
SELECT is(:att, 2, 'the second pickup counts attempt 2');
SELECT isnt(:'lease2'::uuid, :'lease'::uuid, 'with a fresh lease');
SELECT is(pqrun.mark_error(:f, 'second', lease_token => :'lease2'), 'FAILED', 'attempts exhausted: FAILED');
SELECT results_eq(format('SELECT status, attempts, last_error, finished_at = now() FROM pqrun.jobs WHERE id = %s', :f),
	$$VALUES ('FAILED'::pqrun.job_status, 2, 'second', true)$$, 'the FAILED job keeps attempts and error');
SELECT results_eq(format($$SELECT attempt, worker_id, outcome, error FROM pqrun.job_attempts WHERE job_id = %s
	ORDER BY attempt$$, :f),
	$$VALUES (1, 'w1', 'retry', 'first'), (2, 'w2', 'failed', 'second')$$, 'both attempts are in job_attempts');
SELECT is((SELECT count(*) FROM pqrun.jobs WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour'
	AND id = :f), 1::bigint, 'it is in the dead-letter set');

SELECT is(pqrun.retry(:f), true, 'retry of a FAILED job answers true');
SELECT results_eq(format('SELECT status, attempts, run_after = now(), finished_at FROM pqrun.jobs WHERE id = %s', :f),
	$$VALUES ('READY'::pqrun.job_status, 2, true, NULL::timestamptz)$$,
	'it is READY now with attempts kept and finished_at cleared');
SELECT is(pqrun.retry(:f), false, 'retry of a READY job answers false');
SELECT lease_token AS lease3 FROM pqrun.pickup('w3', queues => '{tap_life}') \gset
SELECT is(pqrun.mark_error(:f, 'once more', lease_token => :'lease3', retry_after => '0'), 'FAILED',
	'after a replay the attempts are still exhausted');
SELECT is((SELECT count(*) FROM pqrun.job_attempts WHERE job_id = :f), 3::bigint, 'three attempts in history');

SELECT pqrun.enqueue('doomed', queue => 'tap_life') AS d \gset
SELECT lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_life}') \gset
SELECT is(pqrun.mark_error(:d, 'fatal', terminal => true, lease_token => :'lease'), 'FAILED',
	'a terminal error fails the job at once');
SELECT is((SELECT attempts FROM pqrun.jobs WHERE id = :d), 1, 'with attempts left unused');

SELECT pqrun.enqueue('soon', queue => 'tap_life') AS s \gset
SELECT lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_life}') \gset
SELECT is(pqrun.mark_error(:s, repeat('é', 20000), lease_token => :'lease', retry_after => '0'), 'READY',
	'retry_after 0 makes the job due again at once');
SELECT is((SELECT char_length(last_error) FROM pqrun.jobs WHERE id = :s), 10000, 'last_error is cut to 10,000 characters');
SELECT is((SELECT id FROM pqrun.pickup('w1', queues => '{tap_life}')), :s::bigint, 'and it is runnable');
SELECT is(pqrun.cancel(:s, 'stop'), true, 'cancel of a RUNNING job answers true');
SELECT results_eq(format('SELECT outcome FROM pqrun.job_attempts WHERE job_id = %s ORDER BY attempt', :s),
	$$VALUES ('retry'), ('cancelled')$$, 'the cancelled attempt is in job_attempts');

-- ---- dedupe ------------------------------------------------------------------------------
SELECT pqrun.enqueue('dd', '{"v": 1}', dedupe_key => 'tap-key', queue => 'tap_life') AS k1 \gset
SELECT is(pqrun.enqueue('dd', '{"v": 2}', dedupe_key => 'tap-key', queue => 'tap_life'), :k1::bigint,
	'a READY job holds its dedupe key');
SELECT is((SELECT payload FROM pqrun.jobs WHERE id = :k1), '{"v": 1}'::jsonb, 'and is not changed');
SELECT is((SELECT array_agg(x) FROM pqrun.enqueue_batch(
	'[{"job_type": "dd", "dedupe_key": "tap-key"}, {"job_type": "dd", "dedupe_key": "tap-key"}]') AS x),
	ARRAY[:k1::bigint, :k1::bigint], 'enqueue_batch dedupes too');
SELECT is((SELECT array_agg(x = :k1) FROM pqrun.enqueue_batch(
	'[{"job_type": "dd", "queue": "tap_life_keyless"}, {"job_type": "dd", "dedupe_key": "tap-key"}]') AS x),
	ARRAY[false, true], 'a batch with keyless and keyed jobs inserts the one and dedupes the other');
SELECT lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_life}') \gset
SELECT is(pqrun.enqueue('dd', dedupe_key => 'tap-key', queue => 'tap_life'), :k1::bigint,
	'a RUNNING job holds its dedupe key');
SELECT pqrun.mark_done(:k1, lease_token => :'lease');
SELECT isnt(pqrun.enqueue('dd', dedupe_key => 'tap-key', queue => 'tap_life'), :k1::bigint,
	'a DONE job does not');
SELECT is((SELECT count(*) FROM pqrun.jobs WHERE dedupe_key = 'tap-key' AND status IN ('READY', 'BLOCKED', 'RUNNING')),
	1::bigint, 'one unfinished job per key');

-- ---- dependencies ---------------------------------------------------------------------------
SELECT pqrun.enqueue('parent', queue => 'tap_dep') AS p \gset
SELECT pqrun.enqueue('child', queue => 'tap_dep', depends_on => ARRAY[:p::bigint]) AS c \gset
SELECT pqrun.enqueue('grandchild', queue => 'tap_dep', depends_on => ARRAY[:c::bigint]) AS g \gset
SELECT results_eq(format('SELECT status FROM pqrun.jobs WHERE id IN (%s, %s) ORDER BY id', :c, :g),
	$$VALUES ('BLOCKED'::pqrun.job_status), ('BLOCKED')$$, 'dependents start BLOCKED');
SELECT results_eq($$SELECT id FROM pqrun.pickup('w1', queues => '{tap_dep}', batch_size => 10)$$,
	format('VALUES (%s::bigint)', :p), 'only the parent is runnable');
SELECT pqrun.mark_done(:p);
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :c), 'READY', 'the child is READY once the parent is DONE');
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :g), 'BLOCKED', 'the grandchild still waits');
SELECT is(pqrun.enqueue('late', queue => 'tap_dep', depends_on => ARRAY[:p::bigint]) IS NOT NULL, true,
	'a dependency that is already DONE ...');
SELECT is((SELECT status FROM pqrun.jobs WHERE job_type = 'late'), 'READY', '... counts as met');
SELECT is(pqrun.cancel(:c, 'no'), true, 'cancel the child');
SELECT results_eq(format('SELECT status, finished_at = now() FROM pqrun.jobs WHERE id = %s', :g),
	$$VALUES ('CANCELLED'::pqrun.job_status, true)$$, 'its dependent is CANCELLED too');
SELECT pqrun.enqueue('orphan', queue => 'tap_dep', depends_on => ARRAY[:c::bigint]) AS o \gset
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :o), 'CANCELLED',
	'a job enqueued with a CANCELLED dependency is CANCELLED at once');

-- ---- FIFO groups ----------------------------------------------------------------------------------
SELECT pqrun.enqueue('f', queue => 'tap_fifo', fifo_key => 'tap-g') AS f1 \gset
SELECT pqrun.enqueue('f', queue => 'tap_fifo', fifo_key => 'tap-g', priority => 9) AS f2 \gset
SELECT results_eq(format('SELECT status FROM pqrun.jobs WHERE id IN (%s, %s) ORDER BY id', :f1, :f2),
	$$VALUES ('READY'::pqrun.job_status), ('BLOCKED')$$, 'the second job of a FIFO group waits, whatever its priority');
SELECT lease_token AS lease FROM pqrun.pickup('w1', queues => '{tap_fifo}', batch_size => 10) \gset
SELECT is(pqrun.mark_error(:f1, 'again', lease_token => :'lease', retry_after => '0'), 'READY',
	'the head goes back for a retry');
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :f2), 'BLOCKED', 'a head waiting for retry keeps the group waiting');
SELECT results_eq($$SELECT id FROM pqrun.pickup('w1', queues => '{tap_fifo}', batch_size => 10)$$,
	format('VALUES (%s::bigint)', :f1), 'only the head is runnable again');
SELECT lives_ok(format('SELECT pqrun.mark_done(%s)', :f1), 'the head is DONE');
SELECT is((SELECT status FROM pqrun.jobs WHERE id = :f2), 'READY', 'the next job runs once the head is DONE');

SELECT * FROM finish();
ROLLBACK;
