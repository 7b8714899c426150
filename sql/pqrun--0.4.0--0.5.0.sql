/* sql/pqrun--0.4.0--0.5.0.sql — ALTER EXTENSION pqrun UPDATE from 0.4.0.
 *
 * 0.5.0 remembers when the session holding a running job started, next to
 * its process id, so that orphan rescue no longer takes a new backend that
 * got a reused process id (after a crash, a reboot, in a restarted
 * container, in a restored dump) for the job's holder. Jobs claimed before
 * the update keep holder_started NULL and are judged by process id alone,
 * as before. Until the update runs, the library does not use the column.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.5.0'" to load this file. \quit

ALTER TABLE pqrun.job_live ADD COLUMN holder_started timestamptz;

CREATE FUNCTION pqrun._backend_started() RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_backend_started' LANGUAGE c STABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION pqrun._backend_started() FROM PUBLIC;
