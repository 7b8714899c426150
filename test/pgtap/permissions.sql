-- test/pgtap/permissions.sql — who may do what (API.md, "Permissions").
--
-- The extension grants nothing to PUBLIC; grant_producer, grant_worker and
-- grant_monitor give a role exactly its use:
--   producer: enqueue, enqueue_batch, cancel, read pqrun.jobs
--   worker:   pickup, pickup_from, await_jobs, mark_done, mark_done_batch,
--             mark_done_and_pickup, mark_error, heartbeat, release, snooze,
--             enqueue, enqueue_batch, queue_node, read pqrun.jobs and
--             pqrun.queue_control (await_jobs reads it)
--   monitor:  read jobs, job_attempts, periodic, queue_stats, queue_overview,
--             queue_controls, flow_controls, workers, health, call metrics()
--             and job_dependents
-- and everything else (reap_stale, retry, purge, run_maintenance, schedule,
-- unschedule, pause_queue, resume_queue, set_concurrency_limit,
-- set_rate_limit, set_key_limit, set_key_rate_limit, distribute, the grant
-- functions) stays with the owner. Checked twice: in the catalog
-- (privileges on every function and procedure of schema pqrun, as the
-- catalog lists them, and on every API relation) and by calling the API as
-- each role. On 0.16.0 the hand-kept list of functions missed pickup_from,
-- await_jobs, distribute and queue_node, and PUBLIC could call queue_node. Roles are created in the rolled-back
-- transaction.
BEGIN;
SELECT plan(56);

CREATE ROLE tap_producer;
CREATE ROLE tap_worker;
CREATE ROLE tap_monitor;
CREATE ROLE tap_operator;
CREATE ROLE tap_nobody;
SELECT lives_ok($$SELECT pqrun.grant_producer('tap_producer')$$, 'grant_producer');
SELECT lives_ok($$SELECT pqrun.grant_worker('tap_worker')$$, 'grant_worker');
SELECT lives_ok($$SELECT pqrun.grant_monitor('tap_monitor')$$, 'grant_monitor');
SELECT lives_ok($$SELECT pqrun.grant_operator('tap_operator')$$, 'grant_operator');

-- ---- the catalog ----------------------------------------------------------------
-- Every function and procedure of the schema but the internal ones ("_").
CREATE TEMP TABLE api_fn(name) AS
	SELECT DISTINCT proname::text FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname NOT LIKE '\_%';
CREATE TEMP TABLE api_rel(name) AS VALUES ('jobs'), ('job_attempts'), ('periodic'), ('queue_stats'), ('workers'),
	('health'), ('queue_control'), ('queue_controls'), ('queue_overview'), ('flow_controls');
GRANT SELECT ON api_fn, api_rel TO PUBLIC;

-- may_execute(role): the API functions `role` may call (schema USAGE and EXECUTE).
CREATE FUNCTION pg_temp.may_execute(r name) RETURNS text[] LANGUAGE sql AS $$
	SELECT coalesce(array_agg(DISTINCT p.proname::text ORDER BY p.proname::text), '{}')
	  FROM pg_proc p JOIN api_fn a ON a.name = p.proname
	 WHERE p.pronamespace = 'pqrun'::regnamespace
	   AND has_schema_privilege(r, 'pqrun', 'USAGE') AND has_function_privilege(r, p.oid, 'EXECUTE') $$;
-- may_read(role): the API relations `role` may SELECT from.
CREATE FUNCTION pg_temp.may_read(r name) RETURNS text[] LANGUAGE sql AS $$
	SELECT coalesce(array_agg(a.name::text ORDER BY a.name::text), '{}')
	  FROM api_rel a
	 WHERE has_schema_privilege(r, 'pqrun', 'USAGE')
	   AND has_table_privilege(r, format('pqrun.%I', a.name), 'SELECT') $$;
-- may_write(role): the pqrun relations `role` may change directly.
CREATE FUNCTION pg_temp.may_write(r name) RETURNS text[] LANGUAGE sql AS $$
	SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname::text), '{}')
	  FROM pg_class c
	 WHERE c.relnamespace = 'pqrun'::regnamespace AND c.relkind IN ('r', 'v', 'p', 'm', 'S')
	   AND has_schema_privilege(r, 'pqrun', 'USAGE')
	   AND (has_table_privilege(r, c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')
	        OR (c.relkind = 'S' AND has_sequence_privilege(r, c.oid, 'USAGE, UPDATE'))) $$;
-- internal(role): pqrun functions whose name starts with "_" that `role` may call.
CREATE FUNCTION pg_temp.internal(r name) RETURNS text[] LANGUAGE sql AS $$
	SELECT coalesce(array_agg(p.proname::text ORDER BY p.proname::text), '{}')
	  FROM pg_proc p
	 WHERE p.pronamespace = 'pqrun'::regnamespace AND p.proname LIKE '\_%'
	   AND has_schema_privilege(r, 'pqrun', 'USAGE') AND has_function_privilege(r, p.oid, 'EXECUTE') $$;

SELECT is(pg_temp.may_execute('tap_producer'), ARRAY['cancel', 'enqueue', 'enqueue_batch'],
	'a producer may call enqueue, enqueue_batch and cancel, nothing else');
SELECT is(pg_temp.may_execute('tap_worker'),
	ARRAY['await_jobs', 'enqueue', 'enqueue_batch', 'heartbeat', 'mark_done', 'mark_done_and_pickup', 'mark_done_batch',
	      'mark_error', 'pickup', 'pickup_from', 'queue_node', 'release', 'snooze'],
	'a worker may call pickup, pickup_from, await_jobs, the mark functions, heartbeat, release, snooze, enqueue, '
	'enqueue_batch and queue_node, nothing else');
SELECT is((SELECT count(*)::int FROM api_fn), 36, 'the schema has the 36 functions and procedures docs/ documents');
SELECT is(pg_temp.may_execute('tap_monitor'), ARRAY['job_dependents', 'metrics'],
	'a monitor may call metrics() and job_dependents, nothing else');
SELECT is(pg_temp.may_execute('tap_operator'),
	ARRAY['cancel', 'cancel_jobs', 'job_dependents', 'metrics', 'pause_queue', 'resume_queue', 'retry', 'retry_jobs',
	      'set_concurrency_limit', 'set_key_limit', 'set_key_rate_limit', 'set_rate_limit'],
	'an operator may call what a monitor may, retry, cancel, their bulk forms, pause, resume and the limits, nothing else');
SELECT is(pg_temp.may_execute('tap_nobody'), '{}'::text[], 'PUBLIC may call no API function');

SELECT is(pg_temp.may_read('tap_producer'), ARRAY['jobs'], 'a producer may read pqrun.jobs');
SELECT is(pg_temp.may_read('tap_worker'), ARRAY['jobs', 'queue_control'],
	'a worker may read pqrun.jobs and the flow controls');
SELECT is(pg_temp.may_read('tap_monitor'),
	ARRAY['flow_controls', 'health', 'job_attempts', 'jobs', 'periodic', 'queue_controls', 'queue_overview', 'queue_stats',
	      'workers'],
	'a monitor may read jobs, job_attempts, periodic, queue_controls, flow_controls, queue_stats, queue_overview, '
	'workers and health');
SELECT is(pg_temp.may_read('tap_operator'), pg_temp.may_read('tap_monitor'), 'an operator reads what a monitor reads');
SELECT is(pg_temp.may_read('tap_nobody'), '{}'::text[], 'PUBLIC may read nothing');

SELECT is(pg_temp.may_write(r), '{}'::text[], format('%s may change no pqrun relation directly', r))
  FROM unnest(ARRAY['tap_producer', 'tap_worker', 'tap_monitor', 'tap_operator', 'tap_nobody']::name[]) AS r;
SELECT is(pg_temp.internal(r), '{}'::text[], format('%s may call no internal pqrun function', r))
  FROM unnest(ARRAY['tap_producer', 'tap_worker', 'tap_nobody']::name[]) AS r;
-- Functions in a view run with the privileges of the view's user, so a
-- monitor needs the counters behind pqrun.queue_stats and
-- pqrun.queue_controls, and nothing else.
SELECT is(pg_temp.internal('tap_monitor'), ARRAY['_flow_counters', '_key_buckets', '_label', '_queue_counters', '_shared_counters']::text[],
	'a monitor may call only the counters behind queue_stats, queue_controls and metrics()');
-- The bulk actions run as their caller (they commit, so cannot be SECURITY
-- DEFINER): an operator needs the two helpers they call.
SELECT is(pg_temp.internal('tap_operator'),
	ARRAY['_check_bulk', '_flow_counters', '_jobs_matching', '_key_buckets', '_label', '_queue_counters', '_shared_counters']::text[],
	'an operator may call a monitor''s counters and the bulk actions'' helpers');

-- ---- calling the API as each role ---------------------------------------------------
SET LOCAL ROLE tap_producer;
SELECT lives_ok($$SELECT pqrun.enqueue('perm', queue => 'tap_perm')$$, 'a producer enqueues');
SELECT lives_ok($$SELECT pqrun.enqueue_batch('[{"job_type": "perm", "queue": "tap_perm"}]')$$,
	'a producer enqueues a batch');
SELECT is((SELECT count(*) FROM pqrun.jobs WHERE queue = 'tap_perm'), 2::bigint, 'a producer reads pqrun.jobs');
SELECT is(pqrun.cancel((SELECT max(id) FROM pqrun.jobs WHERE queue = 'tap_perm')), true, 'a producer cancels');
SELECT throws_ok($$SELECT * FROM pqrun.pickup('p', queues => '{tap_perm}')$$, '42501', NULL,
	'a producer cannot pick up');
SELECT throws_ok($$SELECT pqrun.reap_stale()$$, '42501', NULL, 'a producer cannot reap');
SELECT throws_ok($$SELECT * FROM pqrun.job_attempts$$, '42501', NULL, 'a producer cannot read job_attempts');
SELECT throws_ok($$INSERT INTO pqrun.job_live (status, priority, max_attempts, run_after, created_at, updated_at,
	queue, job_type, payload) VALUES ('READY', 0, 1, now(), now(), now(), 'tap_perm', 'x', '{}')$$, '42501', NULL,
	'a producer cannot write the tables behind the API');
RESET ROLE;

SET LOCAL ROLE tap_worker;
SELECT is((SELECT count(*) FROM pqrun.pickup('tap-w', queues => '{tap_perm}')), 1::bigint, 'a worker picks up');
SELECT lives_ok($$SELECT pqrun.mark_done((SELECT id FROM pqrun.jobs WHERE queue = 'tap_perm' AND status = 'RUNNING'))$$,
	'a worker marks done');
SELECT lives_ok($$SELECT pqrun.enqueue('perm', queue => 'tap_perm')$$, 'a worker enqueues (handler chains)');
SELECT throws_ok($$SELECT pqrun.cancel((SELECT max(id) FROM pqrun.jobs WHERE queue = 'tap_perm'))$$, '42501', NULL,
	'a worker cannot cancel');
SELECT throws_ok($$SELECT pqrun.retry((SELECT min(id) FROM pqrun.jobs WHERE queue = 'tap_perm'))$$, '42501', NULL,
	'a worker cannot retry');
SELECT throws_ok($$SELECT pqrun.schedule('tap', 'perm', run_every => '1 hour')$$, '42501', NULL,
	'a worker cannot schedule');
SELECT throws_ok($$SELECT pqrun.pause_queue('tap_perm')$$, '42501', NULL, 'a worker cannot pause a queue');
SELECT throws_ok($$SELECT pqrun.set_concurrency_limit('tap_perm', 1)$$, '42501', NULL, 'a worker cannot set a limit');
SELECT throws_ok($$SELECT pqrun.set_rate_limit('tap_perm', 1)$$, '42501', NULL, 'a worker cannot set a rate limit');
SELECT throws_ok($$SELECT pqrun.set_key_limit('tap_perm', 1)$$, '42501', NULL, 'a worker cannot set a key''s limit');
SELECT lives_ok($$SELECT pqrun.enqueue('perm', queue => 'tap_perm_keyed', concurrency_key => 'k')$$,
	'a worker enqueues a keyed job (its queue becomes keyed)');
SELECT throws_ok($$SELECT pqrun.set_key_rate_limit('tap_perm', 1)$$, '42501', NULL,
	'a worker cannot set a key''s rate limit');
SELECT lives_ok($$SELECT pqrun.enqueue('perm', queue => 'tap_perm', rate_weight => 3)$$,
	'a worker enqueues a job with a rate weight');
RESET ROLE;

SET LOCAL ROLE tap_monitor;
SELECT lives_ok($$SELECT * FROM pqrun.jobs, pqrun.job_attempts, pqrun.queue_stats, pqrun.workers, pqrun.health,
	pqrun.periodic, pqrun.queue_controls LIMIT 1$$, 'a monitor reads every observing relation');
SELECT lives_ok($$SELECT pqrun.metrics()$$, 'a monitor calls metrics()');
SELECT throws_ok($$SELECT pqrun.enqueue('perm')$$, '42501', NULL, 'a monitor cannot enqueue');
SELECT throws_ok($$SELECT pqrun.run_maintenance()$$, '42501', NULL, 'a monitor cannot run maintenance');
RESET ROLE;

SET LOCAL ROLE tap_operator;
SELECT lives_ok($$SELECT pqrun.pause_queue('tap_perm')$$, 'an operator pauses a queue');
SELECT lives_ok($$SELECT pqrun.set_concurrency_limit('tap_perm', 2)$$, 'an operator sets a limit');
SELECT throws_ok($$SELECT pqrun.enqueue('perm')$$, '42501', NULL, 'an operator cannot enqueue');
SELECT throws_ok($$SELECT * FROM pqrun.pickup('o', queues => '{tap_perm}')$$, '42501', NULL, 'an operator cannot pick up');
RESET ROLE;

SET LOCAL ROLE tap_nobody;
SELECT throws_ok($$SELECT pqrun.enqueue('perm')$$, '42501', NULL, 'PUBLIC cannot enqueue');
SELECT throws_ok($$SELECT * FROM pqrun.jobs$$, '42501', NULL, 'PUBLIC cannot read pqrun.jobs');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
