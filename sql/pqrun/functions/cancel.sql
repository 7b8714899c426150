CREATE FUNCTION pqrun.cancel(job_id bigint, reason text DEFAULT NULL, queue text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_cancel' LANGUAGE c VOLATILE;
