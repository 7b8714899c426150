/* Attempts that ended with the job going back to READY (retry, stale,
 * orphaned), and final attempts of jobs re-queued by retry(). The running or
 * final attempt of a job is carried by its own row (see pqrun.job_attempts). */
CREATE TABLE pqrun.attempt_log (
	job_id      bigint      NOT NULL,
	attempt     int         NOT NULL,
	started_at  timestamptz,
	finished_at timestamptz,
	worker_id   text,
	outcome     text        NOT NULL,
	error       text,
	PRIMARY KEY (job_id, attempt)
);
