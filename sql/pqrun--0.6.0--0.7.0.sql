/* sql/pqrun--0.6.0--0.7.0.sql — ALTER EXTENSION pqrun UPDATE from 0.6.0.
 *
 * 0.7.0 adds mark_done_and_pickup: a worker finishes the jobs it completed
 * and claims its next ones in one call and one transaction. grant_worker
 * grants it, and every role that may already call mark_done_batch (a role
 * grant_worker was given before this update) may call it too.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.7.0'" to load this file. \quit

CREATE FUNCTION pqrun.mark_done_and_pickup(
	worker_id    text,
	job_ids      bigint[],
	lease_tokens uuid[]  DEFAULT NULL,
	results      jsonb[] DEFAULT NULL,
	job_types    text[]  DEFAULT NULL,
	queues       text[]  DEFAULT NULL,
	batch_size   int     DEFAULT 1)
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_mark_done_and_pickup' LANGUAGE c VOLATILE ROWS 1
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int) FROM PUBLIC;

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
	               ' pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int),'
	               ' pqrun.mark_error(bigint, text, boolean, uuid, interval),'
	               ' pqrun.heartbeat(bigint, uuid),'
	               ' pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text),'
	               ' pqrun.enqueue_batch(jsonb) TO %s', role);
	EXECUTE format('GRANT EXECUTE ON PROCEDURE pqrun.await_jobs(text[], text[], interval, boolean) TO %s', role);
END $$;

DO $$
DECLARE
	grantee regrole;
BEGIN
	FOR grantee IN
		SELECT DISTINCT a.grantee::pg_catalog.regrole
		  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		 WHERE p.oid OPERATOR(pg_catalog.=) 'pqrun.mark_done_batch(bigint[], uuid[])'::pg_catalog.regprocedure
		   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
		   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
		   AND a.grantee OPERATOR(pg_catalog.<>) 0
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION'
		                          ' pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int) TO %s',
		                          grantee);
	END LOOP;
END $$;
