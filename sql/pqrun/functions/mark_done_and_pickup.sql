/* Finish the jobs a worker completed and claim its next ones: one call,
 * one transaction, one WAL flush per job instead of two. Never waits: with
 * nothing to claim it returns no row at once. */
CREATE FUNCTION pqrun.mark_done_and_pickup(
	worker_id    text,
	job_ids      bigint[],
	lease_tokens uuid[]  DEFAULT NULL,
	results      jsonb[] DEFAULT NULL,
	job_types    text[]  DEFAULT NULL,
	queues       text[]  DEFAULT NULL,
	batch_size   int     DEFAULT 1)
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_mark_done_and_pickup' LANGUAGE c VOLATILE ROWS 1;
