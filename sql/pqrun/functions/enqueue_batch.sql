CREATE FUNCTION pqrun.enqueue_batch(jobs jsonb)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'pqrun_enqueue_batch' LANGUAGE c VOLATILE;
