/* sql/pqrun--0.5.0--0.6.0.sql — ALTER EXTENSION pqrun UPDATE from 0.5.0.
 *
 * 0.6.0 makes grant_producer, grant_worker and grant_monitor refuse an
 * argument that names no role (NULL, 0::regrole) with 22023; they built a
 * broken GRANT statement (42601) before. Everything else in 0.6.0 is in the
 * library: the update changes no table.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.6.0'" to load this file. \quit

/* Every grant_* function refuses what names no role (NULL, 0::regrole)
 * with 22023, instead of building a broken GRANT. */
CREATE FUNCTION pqrun._require_role(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF role IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role) THEN
		RAISE EXCEPTION 'role must name an existing role' USING ERRCODE = 'invalid_parameter_value';
	END IF;
END $$;
REVOKE ALL ON FUNCTION pqrun._require_role(regrole) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pqrun.grant_producer(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text),'
	               ' pqrun.enqueue_batch(jsonb), pqrun.cancel(bigint, text) TO %s', role);
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_worker(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs TO %s', role);
	/* await_jobs cannot be SECURITY DEFINER (it commits): it reads job_live
	 * as its caller. */
	EXECUTE format('GRANT SELECT ON pqrun.job_live TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.pickup(text, text[], text[], int, interval),'
	               ' pqrun.mark_done(bigint, jsonb, uuid), pqrun.mark_done_batch(bigint[], uuid[]),'
	               ' pqrun.mark_error(bigint, text, boolean, uuid, interval),'
	               ' pqrun.heartbeat(bigint, uuid),'
	               ' pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text),'
	               ' pqrun.enqueue_batch(jsonb) TO %s', role);
	EXECUTE format('GRANT EXECUTE ON PROCEDURE pqrun.await_jobs(text[], text[], interval, boolean) TO %s', role);
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_monitor(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs, pqrun.job_attempts, pqrun.queue_stats, pqrun.workers, pqrun.health TO %s', role);
	IF to_regclass('pqrun.periodic') IS NOT NULL THEN
		EXECUTE format('GRANT SELECT ON pqrun.periodic TO %s', role);
	END IF;
	/* Functions in a view run with the privileges of whoever reads it. */
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.metrics(), pqrun._queue_counters() TO %s', role);
END $$;

