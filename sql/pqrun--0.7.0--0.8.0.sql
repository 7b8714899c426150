/* sql/pqrun--0.7.0--0.8.0.sql — ALTER EXTENSION pqrun UPDATE from 0.7.0.
 *
 * 0.8.0 lets a worker report progress with its heartbeat (job_live and
 * job_done.progress, shown in pqrun.jobs), wait in its heartbeat until its
 * job is cancelled (heartbeat's `wait`), and give a running job back
 * without using up an attempt: release (READY at once) and snooze (READY
 * after a delay, counted in snoozes). heartbeat gains two arguments, so it
 * is created anew beside the old one, which then goes; every role that
 * could call it may call the new one, release and snooze.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.8.0'" to load this file. \quit

ALTER TABLE pqrun.job_live ADD COLUMN progress jsonb, ADD COLUMN snoozes int NOT NULL DEFAULT 0;
ALTER TABLE pqrun.job_done ADD COLUMN progress jsonb, ADD COLUMN snoozes int NOT NULL DEFAULT 0;

CREATE OR REPLACE VIEW pqrun.jobs AS
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       NULL::timestamptz AS finished_at, NULL::int AS duration_ms, NULL::jsonb AS result,
	       created_at, updated_at, progress, snoozes
	  FROM pqrun.job_live
	UNION ALL
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       finished_at, duration_ms, result,
	       created_at, updated_at, progress, snoozes
	  FROM pqrun.job_done;

/* Renews the lease and stores `progress` when given; with `wait`, first
 * sleeps until `wait` ends or the job stops being this lease's: 55000
 * (at once for a cancel), or, when its worker finished it, no error and
 * no renewal. */
CREATE FUNCTION pqrun.heartbeat(
	job_id      bigint,
	lease_token uuid     DEFAULT NULL,
	progress    jsonb    DEFAULT NULL,
	wait        interval DEFAULT '0')
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_heartbeat' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* Give a running job back without using up its attempt: READY at once
 * (release) or after `delay` (snooze, counted in snoozes). */
CREATE FUNCTION pqrun.release(job_id bigint, lease_token uuid DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_release' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION pqrun.snooze(job_id bigint, delay interval, lease_token uuid DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_snooze' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION pqrun.heartbeat(bigint, uuid, jsonb, interval), pqrun.release(bigint, uuid),
	pqrun.snooze(bigint, interval, uuid) FROM PUBLIC;

/* Every role that could heartbeat may call the new functions; then the old
 * heartbeat goes. */
DO $$
DECLARE
	grantee regrole;
BEGIN
	FOR grantee IN
		SELECT DISTINCT a.grantee::pg_catalog.regrole
		  FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
		 WHERE p.oid OPERATOR(pg_catalog.=) 'pqrun.heartbeat(bigint, uuid)'::pg_catalog.regprocedure
		   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
		   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
		   AND a.grantee OPERATOR(pg_catalog.<>) 0
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION pqrun.heartbeat(bigint, uuid, jsonb, interval),'
		                          ' pqrun.release(bigint, uuid), pqrun.snooze(bigint, interval, uuid) TO %s',
		                          grantee);
	END LOOP;
END $$;

DROP FUNCTION pqrun.heartbeat(bigint, uuid);

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
	               ' pqrun.heartbeat(bigint, uuid, jsonb, interval),'
	               ' pqrun.release(bigint, uuid), pqrun.snooze(bigint, interval, uuid),'
	               ' pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text),'
	               ' pqrun.enqueue_batch(jsonb) TO %s', role);
	EXECUTE format('GRANT EXECUTE ON PROCEDURE pqrun.await_jobs(text[], text[], interval, boolean) TO %s', role);
END $$;
