CREATE FUNCTION pqrun.retry(job_id bigint, queue text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_retry' LANGUAGE c VOLATILE;
