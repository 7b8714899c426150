CREATE FUNCTION pqrun.purge(older_than interval, statuses pqrun.job_status[] DEFAULT '{DONE,CANCELLED}')
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_purge' LANGUAGE c VOLATILE;
