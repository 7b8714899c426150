/* sql/pqrun.sql — the current install script: what it creates, in order.
 *
 * Each table (with its indexes), view and function is in a file of its own
 * under sql/pqrun/, named after it, so that its history is that file's; the
 * Makefile writes sql/pqrun--<version>.sql with each \ir line below
 * replaced by the file it names (psql runs this file as it is). What spans
 * objects (pg_dump's configuration, the grants of a section) stays here.
 * Storage (docs/design.md): unfinished jobs live in the small, hot
 * pqrun.job_live, finished ones in the append-mostly pqrun.job_done, and
 * pqrun.jobs is the UNION ALL view users query. Every function body and
 * default is schema-qualified so a hostile search_path cannot change its
 * meaning.
 */
\echo Use "CREATE EXTENSION pqrun" to load this file. \quit

CREATE SCHEMA pqrun;

\ir pqrun/types/job_status.sql

\ir pqrun/tables/job_id_seq.sql

\ir pqrun/tables/job_live.sql

\ir pqrun/tables/job_done.sql

\ir pqrun/tables/job_done_default.sql

\ir pqrun/tables/attempt_log.sql

\ir pqrun/tables/job_dep.sql

/* Jobs are data, not part of the extension's definition: pg_dump keeps them,
 * their history and edges, and the id sequence (docs/backups.md). */
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_live', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_done_default', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.attempt_log', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_dep', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_id_seq', '');

\ir pqrun/views/jobs.sql

\ir pqrun/views/job_attempts.sql

/* ---- Producing ---------------------------------------------------------- */

\ir pqrun/functions/enqueue.sql

\ir pqrun/functions/enqueue_batch.sql

/* ---- Consuming ---------------------------------------------------------- */

\ir pqrun/functions/pickup.sql

\ir pqrun/functions/pickup_from.sql

\ir pqrun/functions/mark_done.sql

\ir pqrun/functions/mark_done_batch.sql

\ir pqrun/functions/mark_done_and_pickup.sql

\ir pqrun/functions/mark_error.sql

\ir pqrun/functions/heartbeat.sql

\ir pqrun/functions/release.sql

\ir pqrun/functions/snooze.sql

/* ---- Operating ---------------------------------------------------------- */

\ir pqrun/functions/reap_stale.sql

\ir pqrun/functions/cancel.sql

\ir pqrun/functions/retry.sql

\ir pqrun/functions/purge.sql

\ir pqrun/functions/run_maintenance.sql

\ir pqrun/functions/await_jobs.sql

/* ---- Flow control --------------------------------------------------------- */

\ir pqrun/tables/queue_control.sql

\ir pqrun/functions/_controls_changed.sql

\ir pqrun/functions/_flow_counters.sql

\ir pqrun/functions/_key_buckets.sql

\ir pqrun/functions/pause_queue.sql

\ir pqrun/functions/resume_queue.sql

\ir pqrun/functions/set_concurrency_limit.sql

\ir pqrun/functions/set_rate_limit.sql

\ir pqrun/functions/set_key_limit.sql

\ir pqrun/functions/set_key_rate_limit.sql

REVOKE ALL ON FUNCTION pqrun.pause_queue(text), pqrun.resume_queue(text),
	pqrun.set_concurrency_limit(text, int, text), pqrun.set_rate_limit(text, double precision, int, text),
	pqrun.set_key_limit(text, int, text), pqrun.set_key_rate_limit(text, double precision, int, text),
	pqrun._flow_counters(), pqrun._key_buckets() FROM PUBLIC;

/* ---- Observing ---------------------------------------------------------- */

\ir pqrun/functions/_queue_counters.sql

\ir pqrun/views/queue_stats.sql

\ir pqrun/tables/live_counts.sql
\ir pqrun/tables/live_count_round.sql

\ir pqrun/functions/_count_live_jobs.sql

\ir pqrun/views/queue_overview.sql

\ir pqrun/views/flow_controls.sql
\ir pqrun/views/queue_controls.sql

\ir pqrun/functions/job_dependents.sql

\ir pqrun/views/workers.sql

\ir pqrun/views/health.sql

\ir pqrun/functions/_label.sql

\ir pqrun/functions/_shared_counters.sql

\ir pqrun/functions/metrics.sql

/* ---- Permissions -------------------------------------------------------- */

/* The API functions run as the extension's owner with a pinned search_path:
 * roles get EXECUTE on exactly the functions of their use and no access to
 * the tables behind them. */
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
	          WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pqrun'::regnamespace
	            AND p.prolang OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'c')
	            AND p.prokind OPERATOR(pg_catalog.=) 'f'
	LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pqrun FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA pqrun FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pqrun FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pqrun FROM PUBLIC;

\ir pqrun/functions/_lease_token.sql

\ir pqrun/functions/_backend_started.sql

\ir pqrun/functions/_require_role.sql

\ir pqrun/functions/_api.sql

\ir pqrun/functions/_grant.sql

\ir pqrun/functions/grant_producer.sql

\ir pqrun/functions/grant_worker.sql

\ir pqrun/functions/grant_monitor.sql

REVOKE ALL ON FUNCTION pqrun.grant_producer(regrole), pqrun.grant_worker(regrole), pqrun.grant_monitor(regrole) FROM PUBLIC;

/* ---- Acting on many jobs ------------------------------------------------ */

\ir pqrun/functions/_jobs_matching.sql

\ir pqrun/functions/_check_bulk.sql

\ir pqrun/functions/retry_jobs.sql

\ir pqrun/functions/cancel_jobs.sql

REVOKE ALL ON FUNCTION pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int),
	pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int) FROM PUBLIC;
REVOKE ALL ON PROCEDURE pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint),
	pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint) FROM PUBLIC;

\ir pqrun/functions/grant_operator.sql

/* ---- Background workers ------------------------------------------------- */

\ir pqrun/functions/_register_database.sql

/* Wake the launcher so this database gets its worker within a second. */
SELECT pqrun._register_database();

\ir pqrun/functions/_history_partitions.sql

\ir pqrun/functions/_history_round.sql

/* ---- Periodic schedules ---- */

\ir pqrun/tables/periodic.sql

\ir pqrun/functions/schedule.sql

\ir pqrun/functions/unschedule.sql

\ir pqrun/functions/cron_next.sql

\ir pqrun/functions/_fire_due_schedules.sql

\ir pqrun/functions/_run_every_next.sql

/* As the other API functions (see "Permissions"): the ones that touch
 * pqrun.periodic run as the extension's owner with a pinned search_path, and
 * PUBLIC gets nothing. */
ALTER FUNCTION pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION pqrun.unschedule(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION pqrun._fire_due_schedules() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean),
	pqrun.unschedule(text, text), pqrun.cron_next(text, timestamptz), pqrun._fire_due_schedules(),
	pqrun._run_every_next(interval, timestamptz, timestamptz) FROM PUBLIC;

/* ---- Citus ---- */

\ir pqrun/functions/distribute.sql

\ir pqrun/functions/queue_node.sql

REVOKE ALL ON FUNCTION pqrun.distribute(int) FROM PUBLIC;
