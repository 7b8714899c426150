/* sql/pqrun--0.1.0--0.2.0.sql — ALTER EXTENSION pqrun UPDATE from 0.1.0.
 *
 * 0.2.0 adds mark_done_batch (set-based finishing). The storage is unchanged,
 * so the update only adds the function, gives it the API functions'
 * SECURITY DEFINER and pinned search_path, teaches grant_worker about it and
 * grants it to every role that may already call mark_done.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.2.0'" to load this file. \quit

CREATE FUNCTION pqrun.mark_done_batch(job_ids bigint[], lease_tokens uuid[] DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'pqrun_mark_done_batch' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION pqrun.mark_done_batch(bigint[], uuid[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION pqrun.grant_worker(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
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

/* Roles made workers under 0.1.0 keep their rights on 0.2.0's additions. */
DO $$
DECLARE
	grantee regrole;
BEGIN
	FOR grantee IN
		SELECT DISTINCT a.grantee::regrole
		  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		 WHERE p.oid OPERATOR(pg_catalog.=) 'pqrun.mark_done(bigint, jsonb, uuid)'::pg_catalog.regprocedure
		   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
		   AND a.grantee OPERATOR(pg_catalog.<>) 0
		   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION pqrun.mark_done_batch(bigint[], uuid[]) TO %s', grantee);
	END LOOP;
END $$;
