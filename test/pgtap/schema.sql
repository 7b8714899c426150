-- test/pgtap/schema.sql — the shape of pqrun's SQL contract (API.md).
--
-- Schema, the job_status enum, the jobs and job_attempts relations with every
-- documented column and its type, every API function that sql/pqrun.sql
-- defines (argument types, return type, and argument names, order and
-- defaults through pg_get_function_arguments()), the observing views and
-- functions, and the documented SQLSTATEs of bad input. Who may call what is
-- in permissions.sql.
BEGIN;
SELECT plan(288);

-- Deparsed interval defaults depend on the output style.
SET LOCAL IntervalStyle = postgres;
SET LOCAL search_path = public;

-- ---- schema and type -------------------------------------------------------
SELECT has_schema('pqrun');
SELECT has_type('pqrun', 'job_status', 'type pqrun.job_status exists');
SELECT has_enum('pqrun', 'job_status', 'pqrun.job_status is an enum');
SELECT enum_has_labels('pqrun', 'job_status',
	ARRAY['BLOCKED', 'READY', 'RUNNING', 'DONE', 'FAILED', 'CANCELLED'],
	'pqrun.job_status has the six states, in lifecycle order');

-- ---- pqrun.jobs --------------------------------------------------------------
SELECT has_relation('pqrun', 'jobs', 'pqrun.jobs exists (table or view)');
SELECT ok((SELECT relkind IN ('r', 'v', 'p', 'm') FROM pg_class WHERE oid = 'pqrun.jobs'::regclass),
	'pqrun.jobs can be queried like a table');

SELECT unnest(ARRAY[has_column('pqrun', 'jobs', c, format('pqrun.jobs has column %s', c)),
                    col_type_is('pqrun', 'jobs', c, t, format('pqrun.jobs.%s is %s', c, t))])
  FROM (VALUES ('id', 'bigint'), ('queue', 'text'), ('job_type', 'text'), ('payload', 'jsonb'),
               ('status', 'pqrun.job_status'), ('priority', 'integer'), ('attempts', 'integer'),
               ('max_attempts', 'integer'), ('run_after', 'timestamp with time zone'),
               ('timeout_seconds', 'integer'), ('locked_at', 'timestamp with time zone'),
               ('locked_by', 'text'), ('lease_token', 'uuid'), ('dedupe_key', 'text'), ('fifo_key', 'text'),
               ('depends_on', 'bigint[]'), ('last_error', 'text'), ('finished_at', 'timestamp with time zone'),
               ('duration_ms', 'integer'), ('result', 'jsonb'), ('created_at', 'timestamp with time zone'),
               ('updated_at', 'timestamp with time zone'), ('progress', 'jsonb'), ('snoozes', 'integer'),
               ('concurrency_key', 'text'), ('rate_weight', 'integer')) AS cols(c, t);

-- ---- pqrun.job_attempts ------------------------------------------------------
SELECT has_relation('pqrun', 'job_attempts', 'pqrun.job_attempts exists (table or view)');
SELECT unnest(ARRAY[has_column('pqrun', 'job_attempts', c, format('pqrun.job_attempts has column %s', c)),
                    col_type_is('pqrun', 'job_attempts', c, t, format('pqrun.job_attempts.%s is %s', c, t))])
  FROM (VALUES ('job_id', 'bigint'), ('attempt', 'integer'), ('worker_id', 'text'),
               ('started_at', 'timestamp with time zone'), ('finished_at', 'timestamp with time zone'),
               ('outcome', 'text'), ('error', 'text')) AS cols(c, t);

-- ---- history: job_done partitioned by finish time (0.12.0) -------------------
SELECT is((SELECT relkind::text FROM pg_class WHERE oid = 'pqrun.job_done'::regclass), 'p',
	'pqrun.job_done is partitioned');
SELECT is(pg_get_partkeydef('pqrun.job_done'::regclass), 'RANGE (finished_at)', 'by range of finished_at');
SELECT is((SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = 'pqrun.job_done_default'::regclass),
	'DEFAULT', 'pqrun.job_done_default is its default partition');
SELECT is((SELECT count(*)::int FROM pg_index WHERE indrelid = 'pqrun.job_done'::regclass), 0,
	'job_done has no index of its own (each partition has its own)');
SELECT ok(NOT has_function_privilege('public',
	'pqrun._history_round(timestamptz, interval, int, timestamptz, timestamptz)', 'EXECUTE'),
	'only the owner may make and drop partitions');

-- ---- pqrun.periodic ----------------------------------------------------------
SELECT has_relation('pqrun', 'periodic', 'pqrun.periodic exists');
SELECT has_column('pqrun', 'periodic', c, format('pqrun.periodic has column %s', c))
  FROM unnest(ARRAY['name', 'key', 'job_type', 'payload', 'priority', 'queue', 'cron', 'run_every', 'active',
                    'next_run', 'last_run', 'last_job_id']) AS c;

-- ---- functions: existence with argument types, return type, and the full
-- argument list (names, order, defaults) as PostgreSQL prints it -------------
SELECT unnest(ARRAY[
	has_function('pqrun', f, a, format('function pqrun.%s(%s) exists', f, array_to_string(a, ', '))),
	function_returns('pqrun', f, a, r, format('pqrun.%s returns %s', f, r)),
	is((SELECT pg_get_function_arguments(p.oid) FROM pg_proc p
	     WHERE p.pronamespace = 'pqrun'::regnamespace AND p.proname = f
	       AND pg_catalog.oidvectortypes(p.proargtypes) = array_to_string(a, ', ')), d,
	   format('pqrun.%s argument names and defaults', f))])
  FROM (VALUES
	('enqueue', ARRAY['text', 'jsonb', 'integer', 'timestamp with time zone', 'integer', 'integer', 'text', 'text',
	                  'bigint[]', 'text', 'text', 'integer'], 'bigint',
	 'job_type text, payload jsonb DEFAULT ''{}''::jsonb, priority integer DEFAULT 0, '
	 'run_after timestamp with time zone DEFAULT now(), max_attempts integer DEFAULT 5, '
	 'timeout_seconds integer DEFAULT NULL::integer, dedupe_key text DEFAULT NULL::text, '
	 'queue text DEFAULT ''default''::text, depends_on bigint[] DEFAULT NULL::bigint[], '
	 'fifo_key text DEFAULT NULL::text, concurrency_key text DEFAULT NULL::text, '
	 'rate_weight integer DEFAULT NULL::integer'),
	('enqueue_batch', ARRAY['jsonb'], 'setof bigint', 'jobs jsonb'),
	('pickup', ARRAY['text', 'text[]', 'text[]', 'integer', 'interval'], 'setof pqrun.jobs',
	 'worker_id text, job_types text[] DEFAULT NULL::text[], queues text[] DEFAULT NULL::text[], '
	 'batch_size integer DEFAULT 1, wait interval DEFAULT ''00:00:00''::interval'),
	('pickup_from', ARRAY['text', 'text', 'integer', 'interval', 'text[]'], 'setof pqrun.jobs',
	 'worker_id text, queue text, batch_size integer DEFAULT 1, wait interval DEFAULT ''00:00:00''::interval, '
	 'job_types text[] DEFAULT NULL::text[]'),
	('mark_done', ARRAY['bigint', 'jsonb', 'uuid', 'text'], 'void',
	 'job_id bigint, result jsonb DEFAULT NULL::jsonb, lease_token uuid DEFAULT NULL::uuid, queue text DEFAULT NULL::text'),
	('mark_done_and_pickup', ARRAY['text', 'bigint[]', 'uuid[]', 'jsonb[]', 'text[]', 'text[]', 'integer'],
	 'setof pqrun.jobs',
	 'worker_id text, job_ids bigint[], lease_tokens uuid[] DEFAULT NULL::uuid[], results jsonb[] DEFAULT NULL::jsonb[], '
	 'job_types text[] DEFAULT NULL::text[], queues text[] DEFAULT NULL::text[], batch_size integer DEFAULT 1'),
	('mark_error', ARRAY['bigint', 'text', 'boolean', 'uuid', 'interval', 'text'], 'pqrun.job_status',
	 'job_id bigint, error text, terminal boolean DEFAULT false, lease_token uuid DEFAULT NULL::uuid, '
	 'retry_after interval DEFAULT NULL::interval, queue text DEFAULT NULL::text'),
	('heartbeat', ARRAY['bigint', 'uuid', 'jsonb', 'interval', 'text'], 'void',
	 'job_id bigint, lease_token uuid DEFAULT NULL::uuid, progress jsonb DEFAULT NULL::jsonb, '
	 'wait interval DEFAULT ''00:00:00''::interval, queue text DEFAULT NULL::text'),
	('release', ARRAY['bigint', 'uuid', 'text'], 'void',
	 'job_id bigint, lease_token uuid DEFAULT NULL::uuid, queue text DEFAULT NULL::text'),
	('snooze', ARRAY['bigint', 'interval', 'uuid', 'text'], 'void',
	 'job_id bigint, delay interval, lease_token uuid DEFAULT NULL::uuid, queue text DEFAULT NULL::text'),
	('reap_stale', ARRAY['interval'], 'integer', 'default_stale_after interval DEFAULT ''00:20:00''::interval'),
	('cancel', ARRAY['bigint', 'text', 'text'], 'boolean',
	 'job_id bigint, reason text DEFAULT NULL::text, queue text DEFAULT NULL::text'),
	('retry', ARRAY['bigint', 'text'], 'boolean', 'job_id bigint, queue text DEFAULT NULL::text'),
	('purge', ARRAY['interval', 'pqrun.job_status[]'], 'bigint',
	 'older_than interval, statuses pqrun.job_status[] DEFAULT ''{DONE,CANCELLED}''::pqrun.job_status[]'),
	('run_maintenance', ARRAY[]::text[], 'jsonb', ''),
	('schedule', ARRAY['text', 'text', 'text', 'interval', 'jsonb', 'integer', 'text', 'text', 'boolean'], 'void',
	 'name text, job_type text, cron text DEFAULT NULL::text, run_every interval DEFAULT NULL::interval, '
	 'payload jsonb DEFAULT ''{}''::jsonb, priority integer DEFAULT 0, key text DEFAULT ''''::text, '
	 'queue text DEFAULT ''default''::text, active boolean DEFAULT true'),
	('unschedule', ARRAY['text', 'text'], 'boolean', 'name text, key text DEFAULT ''''::text'),
	('cron_next', ARRAY['text', 'timestamp with time zone'], 'timestamp with time zone',
	 'expr text, after timestamp with time zone DEFAULT now()'),
	('pause_queue', ARRAY['text'], 'boolean', 'queue text'),
	('resume_queue', ARRAY['text'], 'boolean', 'queue text'),
	('set_concurrency_limit', ARRAY['text', 'integer', 'text'], 'void',
	 'queue text, max_running integer, job_type text DEFAULT NULL::text'),
	('set_rate_limit', ARRAY['text', 'double precision', 'integer', 'text'], 'void',
	 'queue text, per_second double precision, burst integer DEFAULT 1, job_type text DEFAULT NULL::text'),
	('set_key_limit', ARRAY['text', 'integer', 'text'], 'void',
	 'queue text, max_running integer, concurrency_key text DEFAULT NULL::text'),
	('set_key_rate_limit', ARRAY['text', 'double precision', 'integer', 'text'], 'void',
	 'queue text, per_second double precision, burst integer DEFAULT 1, concurrency_key text DEFAULT NULL::text')
  ) AS fns(f, a, r, d);

-- ---- SQLSTATEs of bad input (Bad input table) ----------------------------------
SELECT throws_ok($$SELECT pqrun.enqueue('')$$, '22023', NULL, 'empty job_type: 22023');
SELECT throws_ok($$SELECT pqrun.enqueue(NULL)$$, '22023', NULL, 'NULL job_type: 22023');
SELECT throws_ok($$SELECT pqrun.enqueue('t', max_attempts => 0)$$, '22023', NULL, 'max_attempts < 1: 22023');
SELECT throws_ok($$SELECT pqrun.enqueue('t', timeout_seconds => 0)$$, '22023', NULL, 'timeout_seconds <= 0: 22023');
SELECT throws_ok($$SELECT pqrun.enqueue('t', depends_on => ARRAY[-42::bigint])$$, '22023', NULL,
	'unknown id in depends_on: 22023');
SELECT throws_ok($$SELECT * FROM pqrun.enqueue_batch('{"job_type": "t"}')$$, '22023', NULL,
	'enqueue_batch of an object, not an array: 22023');
SELECT throws_ok($$SELECT * FROM pqrun.enqueue_batch('[1, 2]')$$, '22023', NULL,
	'enqueue_batch of an array of non-objects: 22023');
SELECT throws_ok($$SELECT * FROM pqrun.pickup('w', job_types => '{}')$$, '22023', NULL, 'empty job_types: 22023');
SELECT throws_ok($$SELECT * FROM pqrun.pickup('w', queues => '{}')$$, '22023', NULL, 'empty queues: 22023');
SELECT throws_ok($$SELECT * FROM pqrun.pickup('w', batch_size => 0)$$, '22023', NULL, 'batch_size < 1: 22023');
SELECT throws_ok($$SELECT * FROM pqrun.pickup('w', wait => '-1 second')$$, '22023', NULL, 'negative wait: 22023');
SELECT throws_ok($$SELECT pqrun.schedule('tap', 't', cron => 'not a cron')$$, '22023', NULL, 'malformed cron: 22023');
SELECT throws_ok($$SELECT pqrun.schedule('tap', 't')$$, '22023', NULL, 'neither cron nor run_every: 22023');
SELECT throws_ok($$SELECT pqrun.schedule('tap', 't', '* * * * *', '1 hour')$$, '22023', NULL,
	'both cron and run_every: 22023');
SELECT throws_ok($$SELECT pqrun.mark_done(-42)$$, 'P0002', NULL, 'mark_done of an unknown id: P0002');
SELECT throws_ok($$SELECT pqrun.mark_error(-42, 'e')$$, 'P0002', NULL, 'mark_error of an unknown id: P0002');
SELECT throws_ok($$SELECT pqrun.heartbeat(-42)$$, 'P0002', NULL, 'heartbeat of an unknown id: P0002');
SELECT throws_ok($$SELECT pqrun.cancel(-42)$$, 'P0002', NULL, 'cancel of an unknown id: P0002');
SELECT throws_ok($$SELECT pqrun.retry(-42)$$, 'P0002', NULL, 'retry of an unknown id: P0002');

CREATE TEMP TABLE tap_job AS SELECT pqrun.enqueue('tap_schema', queue => 'tap_schema') AS id;
SELECT throws_ok(format('SELECT pqrun.mark_done(%s)', id), '55000', NULL, 'mark_done of a READY job: 55000')
  FROM tap_job;
SELECT throws_ok(format('SELECT pqrun.heartbeat(%s)', id), '55000', NULL, 'heartbeat of a READY job: 55000')
  FROM tap_job;
SELECT throws_ok(format('SELECT pqrun.mark_error(%s, %L)', id, 'e'), '55000', NULL,
	'mark_error of a READY job: 55000') FROM tap_job;
SELECT is(count(*), 1::bigint, 'pickup claims the job')
  FROM pqrun.pickup('tap-w', queues => '{tap_schema}');
SELECT throws_ok(format('SELECT pqrun.mark_done(%s, lease_token => %L)', id, gen_random_uuid()), '55000', NULL,
	'mark_done with a foreign lease: 55000') FROM tap_job;
SELECT is(status, 'RUNNING'::pqrun.job_status, 'a refused mark_done changes nothing')
  FROM pqrun.jobs WHERE id = (SELECT id FROM tap_job);

SET LOCAL pqrun.max_payload_bytes = 1000;
SELECT throws_ok($$SELECT pqrun.enqueue('t', jsonb_build_object('blob', repeat('x', 2000)))$$, '54000', NULL,
	'payload above pqrun.max_payload_bytes: 54000');
SELECT throws_ok($$SELECT * FROM pqrun.enqueue_batch(jsonb_build_array(jsonb_build_object('job_type', 't',
	'payload', jsonb_build_object('blob', repeat('x', 2000)))))$$, '54000', NULL,
	'enqueue_batch payload above pqrun.max_payload_bytes: 54000');
RESET pqrun.max_payload_bytes;

-- ---- observing: views and metrics() ------------------------------------------
SELECT has_relation('pqrun', 'queue_stats', 'pqrun.queue_stats exists');
SELECT unnest(ARRAY[has_column('pqrun', 'queue_stats', c, format('pqrun.queue_stats has column %s', c)),
                    col_type_is('pqrun', 'queue_stats', c, t, format('pqrun.queue_stats.%s is %s', c, t))])
  FROM (VALUES ('queue', 'text'), ('job_type', 'text'), ('blocked', 'bigint'), ('ready', 'bigint'),
               ('running', 'bigint'), ('done', 'bigint'), ('failed', 'bigint'), ('cancelled', 'bigint'),
               ('oldest_ready_age', 'interval'), ('done_last_5min', 'bigint'),
               ('avg_duration_ms_last_5min', 'double precision')) AS cols(c, t);
SELECT has_relation('pqrun', 'workers', 'pqrun.workers exists');
SELECT unnest(ARRAY[has_column('pqrun', 'workers', c, format('pqrun.workers has column %s', c)),
                    col_type_is('pqrun', 'workers', c, t, format('pqrun.workers.%s is %s', c, t))])
  FROM (VALUES ('worker_id', 'text'), ('last_seen', 'timestamp with time zone'), ('running_jobs', 'integer'))
    AS cols(c, t);
SELECT has_relation('pqrun', 'queue_overview', 'pqrun.queue_overview exists');
SELECT unnest(ARRAY[has_column('pqrun', 'queue_overview', c, format('pqrun.queue_overview has column %s', c)),
                    col_type_is('pqrun', 'queue_overview', c, t, format('pqrun.queue_overview.%s is %s', c, t))])
  FROM (VALUES ('queue', 'text'), ('job_type', 'text'), ('blocked', 'bigint'), ('ready', 'bigint'),
               ('delayed', 'bigint'), ('running', 'bigint'), ('oldest_ready_age', 'interval'), ('done', 'bigint'),
               ('failed', 'bigint'), ('cancelled', 'bigint'), ('done_last_5min', 'bigint'),
               ('counted_at', 'timestamp with time zone')) AS cols(c, t);
SELECT has_relation('pqrun', 'flow_controls', 'pqrun.flow_controls exists');
SELECT is(ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = 'pqrun.flow_controls'::regclass AND attnum > 0
                EXCEPT SELECT attname::text FROM pg_attribute WHERE attrelid = 'pqrun.queue_controls'::regclass),
          '{}'::text[], 'pqrun.flow_controls has no column pqrun.queue_controls lacks');
SELECT has_relation('pqrun', 'health', 'pqrun.health exists');
SELECT unnest(ARRAY[
	has_function('pqrun', f, a, format('function pqrun.%s(%s) exists', f, array_to_string(a, ', '))),
	function_returns('pqrun', f, a, r, format('pqrun.%s returns %s', f, r)),
	is((SELECT pg_get_function_arguments(p.oid) FROM pg_proc p
	     WHERE p.pronamespace = 'pqrun'::regnamespace AND p.proname = f
	       AND pg_catalog.oidvectortypes(p.proargtypes) = array_to_string(a, ', ')), d,
	   format('pqrun.%s argument names and defaults', f))])
  FROM (VALUES
	('metrics', ARRAY[]::text[], 'text', ''),
	('grant_producer', ARRAY['regrole'], 'void', 'role regrole'),
	('grant_worker', ARRAY['regrole'], 'void', 'role regrole'),
	('grant_monitor', ARRAY['regrole'], 'void', 'role regrole'),
	('grant_operator', ARRAY['regrole'], 'void', 'role regrole')
  ) AS fns(f, a, r, d);
SELECT matches(pqrun.metrics(), '^# HELP pqrun_', 'metrics() answers Prometheus text');

-- ---- the rest: kind, arguments and result as PostgreSQL prints them ----------
CREATE TEMP TABLE other_fns(f, k, a, r) AS VALUES
	('mark_done_batch', 'f', 'job_ids bigint[], lease_tokens uuid[] DEFAULT NULL::uuid[], queue text DEFAULT NULL::text',
	 'integer'),
	('await_jobs', 'p', 'IN job_types text[] DEFAULT NULL::text[], IN queues text[] DEFAULT NULL::text[], '
	 'IN wait interval DEFAULT ''00:00:30''::interval, INOUT ready boolean DEFAULT NULL::boolean', NULL),
	('retry_jobs', 'p', 'IN queue text DEFAULT NULL::text, IN job_type text DEFAULT NULL::text, '
	 'IN statuses pqrun.job_status[] DEFAULT ''{FAILED,CANCELLED}''::pqrun.job_status[], '
	 'IN finished_after timestamp with time zone DEFAULT NULL::timestamp with time zone, '
	 'IN finished_before timestamp with time zone DEFAULT NULL::timestamp with time zone, '
	 'IN error_contains text DEFAULT NULL::text, IN payload_contains jsonb DEFAULT NULL::jsonb, '
	 'IN batch_size integer DEFAULT 1000, INOUT retried bigint DEFAULT NULL::bigint', NULL),
	('cancel_jobs', 'p', 'IN queue text DEFAULT NULL::text, IN job_type text DEFAULT NULL::text, '
	 'IN statuses pqrun.job_status[] DEFAULT ''{READY,BLOCKED}''::pqrun.job_status[], '
	 'IN created_after timestamp with time zone DEFAULT NULL::timestamp with time zone, '
	 'IN created_before timestamp with time zone DEFAULT NULL::timestamp with time zone, '
	 'IN error_contains text DEFAULT NULL::text, IN payload_contains jsonb DEFAULT NULL::jsonb, '
	 'IN reason text DEFAULT NULL::text, IN batch_size integer DEFAULT 1000, INOUT cancelled bigint DEFAULT NULL::bigint', NULL),
	('distribute', 'f', 'shard_count integer DEFAULT 32', 'void'),
	('job_dependents', 'f', 'job_id bigint, max_rows integer DEFAULT 100',
	 'TABLE(id bigint, queue text, job_type text, status pqrun.job_status)'),
	('queue_node', 'f', 'queue text, OUT host text, OUT port integer', 'record');
SELECT unnest(ARRAY[
	is((SELECT prokind::text FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname = f), k,
	   format('pqrun.%s is a %s', f, CASE k WHEN 'p' THEN 'procedure' ELSE 'function' END)),
	is((SELECT pg_get_function_arguments(oid) FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname = f),
	   a, format('pqrun.%s argument names and defaults', f)),
	is((SELECT pg_get_function_result(oid) FROM pg_proc WHERE pronamespace = 'pqrun'::regnamespace AND proname = f),
	   r, format('pqrun.%s returns %s', f, coalesce(r, 'its INOUT argument')))])
  FROM other_fns;
-- Every function and procedure of the schema but the internal ones ("_") is
-- checked above; on 0.16.0 this file left out the four just above.
SELECT is(ARRAY(SELECT DISTINCT proname::text FROM pg_proc
                 WHERE pronamespace = 'pqrun'::regnamespace AND proname !~ '^_'
                EXCEPT SELECT unnest(ARRAY['enqueue', 'enqueue_batch', 'pickup', 'pickup_from', 'mark_done',
                                           'mark_done_and_pickup', 'mark_error', 'heartbeat', 'release', 'snooze',
                                           'reap_stale', 'cancel', 'retry', 'purge', 'run_maintenance', 'schedule',
                                           'unschedule', 'cron_next', 'pause_queue', 'resume_queue',
                                           'set_concurrency_limit', 'set_rate_limit', 'set_key_limit',
                                           'set_key_rate_limit', 'metrics', 'grant_producer', 'grant_worker',
                                           'grant_monitor', 'grant_operator'])
                EXCEPT SELECT f FROM other_fns ORDER BY 1), '{}'::text[],
	'every public function and procedure of the schema is checked here');

-- What the grant functions give and distribute() delegates is one list,
-- pqrun._api() (0.21.0): each object it names exists, and the functions it
-- grants no role are the owner's.
SELECT is(ARRAY(SELECT object FROM pqrun._api() a
                 WHERE CASE WHEN a.kind = 'r' THEN to_regclass(a.object) IS NULL ELSE to_regprocedure(a.object) IS NULL END),
          '{}'::text[], 'every object pqrun._api() lists exists');
SELECT is(ARRAY(SELECT DISTINCT p.proname::text FROM pg_proc p
                 WHERE p.pronamespace = 'pqrun'::regnamespace AND p.proname !~ '^_'
                   AND p.oid NOT IN (SELECT to_regprocedure(object) FROM pqrun._api() WHERE kind <> 'r' AND roles <> '{}')
                 ORDER BY 1),
          ARRAY['cron_next', 'distribute', 'grant_monitor', 'grant_operator', 'grant_producer', 'grant_worker', 'purge',
                'reap_stale', 'run_maintenance', 'schedule', 'unschedule'],
          'the API functions pqrun._api() grants no role are the owner''s alone');

SELECT * FROM finish();
ROLLBACK;
