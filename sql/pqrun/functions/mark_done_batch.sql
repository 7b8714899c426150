CREATE FUNCTION pqrun.mark_done_batch(job_ids bigint[], lease_tokens uuid[] DEFAULT NULL, queue text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'pqrun_mark_done_batch' LANGUAGE c VOLATILE;
