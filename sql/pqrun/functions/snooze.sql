CREATE FUNCTION pqrun.snooze(job_id bigint, delay interval, lease_token uuid DEFAULT NULL, queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_snooze' LANGUAGE c VOLATILE;
