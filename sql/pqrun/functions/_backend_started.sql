/* When this backend started: with holder_pid it names the session holding a
 * running job, since process ids are reused (orphan rescue, docs/operations.md). */
CREATE FUNCTION pqrun._backend_started() RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_backend_started' LANGUAGE c STABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION pqrun._backend_started() FROM PUBLIC;
