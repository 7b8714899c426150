CREATE FUNCTION pqrun.mark_done(job_id bigint, result jsonb DEFAULT NULL, lease_token uuid DEFAULT NULL,
                                queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_mark_done' LANGUAGE c VOLATILE;
