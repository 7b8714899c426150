-- setup: install pqrun and show the objects it creates (the SQL contract of
-- API.md: function signatures with their defaults, the job states and the
-- columns of the jobs and job_attempts relations).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS pqrun CASCADE;
CREATE EXTENSION pqrun;
RESET client_min_messages;
\pset null '(null)'

-- (pg_extension rather than \dx, whose columns change with psql's version)
SELECT e.extname, e.extversion, n.nspname AS schema, pg_catalog.obj_description(e.oid, 'pg_extension') AS description
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pqrun';

-- The extension is not relocatable; it owns schema pqrun (created by its script,
-- so DROP EXTENSION drops it) and is registered in pg_catalog.
SELECT e.extname, n.nspname AS schema, e.extrelocatable
  FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
 WHERE e.extname = 'pqrun';

-- Every function of API.md, with its argument list (names, types,
-- defaults) and its result type. (Extra functions are allowed by the
-- contract and not listed here.)
\pset format unaligned
SELECT p.proname,
       pg_catalog.pg_get_function_arguments(p.oid) AS arguments,
       pg_catalog.pg_get_function_result(p.oid) AS result
  FROM pg_proc p
 WHERE p.pronamespace = 'pqrun'::regnamespace
   AND p.proname IN ('enqueue', 'enqueue_batch', 'pickup', 'mark_done', 'mark_error', 'heartbeat',
                     'reap_stale', 'cancel', 'retry', 'purge', 'run_maintenance',
                     'schedule', 'unschedule', 'cron_next', 'metrics',
                     'grant_producer', 'grant_worker', 'grant_monitor')
 ORDER BY p.proname, arguments;
\pset format aligned

-- The job states, in their enum order.
SELECT e.enumsortorder, e.enumlabel
  FROM pg_enum e
 WHERE e.enumtypid = 'pqrun.job_status'::regtype
 ORDER BY e.enumsortorder;

-- Columns of pqrun.jobs, in order, with their types.
SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = 'pqrun.jobs'::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;

-- Columns of pqrun.job_attempts, in order, with their types.
SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_attribute a
 WHERE a.attrelid = 'pqrun.job_attempts'::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;

-- pickup returns rows of pqrun.jobs.
SELECT pg_catalog.format_type(p.prorettype, NULL) AS pickup_returns, p.proretset
  FROM pg_proc p
 WHERE p.oid = 'pqrun.pickup'::regproc;

-- A fresh install is empty.
SELECT count(*) AS jobs FROM pqrun.jobs;
SELECT count(*) AS attempts FROM pqrun.job_attempts;

-- The settings of API.md exist with their documented defaults.
SELECT name, setting, unit
  FROM pg_settings
 WHERE name IN ('pqrun.backoff', 'pqrun.max_payload_bytes', 'pqrun.stale_timeout', 'pqrun.retention')
 ORDER BY name;

-- Settings beyond API.md, with their defaults and when they can change.
SELECT name, setting, unit, context
  FROM pg_settings
 WHERE name IN ('pqrun.notify', 'pqrun.malloc_trim_threshold', 'pqrun.synchronous_pickup', 'pqrun.deferred_claims')
 ORDER BY name;

-- The monitoring queries of API.md work verbatim (on the empty queue).
SELECT * FROM pqrun.jobs WHERE status = 'RUNNING';
SELECT * FROM pqrun.jobs WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour';
SELECT job_type, avg(duration_ms), count(*) FROM pqrun.jobs WHERE status = 'DONE' GROUP BY job_type;
SELECT * FROM pqrun.jobs WHERE status = 'RUNNING' AND locked_at < now() - interval '20 minutes';
