CREATE FUNCTION pqrun.mark_error(
	job_id      bigint,
	error       text,
	terminal    boolean  DEFAULT false,
	lease_token uuid     DEFAULT NULL,
	retry_after interval DEFAULT NULL,
	queue       text     DEFAULT NULL)
RETURNS pqrun.job_status
AS 'MODULE_PATHNAME', 'pqrun_mark_error' LANGUAGE c VOLATILE;
