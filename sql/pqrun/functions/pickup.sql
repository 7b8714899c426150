CREATE FUNCTION pqrun.pickup(
	worker_id  text,
	job_types  text[]   DEFAULT NULL,
	queues     text[]   DEFAULT NULL,
	batch_size int      DEFAULT 1,
	wait       interval DEFAULT '0')
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_pickup' LANGUAGE c VOLATILE ROWS 1;
