CREATE PROCEDURE pqrun.await_jobs(
	job_types text[]   DEFAULT NULL,
	queues    text[]   DEFAULT NULL,
	wait      interval DEFAULT '30 seconds',
	INOUT ready boolean DEFAULT NULL)
AS 'MODULE_PATHNAME', 'pqrun_await_jobs' LANGUAGE c;
