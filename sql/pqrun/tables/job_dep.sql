/* Pending dependency edges: job_id waits for dep_id. An edge is deleted when
 * dep_id finishes DONE; a job whose last edge is gone becomes runnable. */
CREATE TABLE pqrun.job_dep (
	job_id bigint NOT NULL,
	dep_id bigint NOT NULL,
	PRIMARY KEY (dep_id, job_id)
);
CREATE INDEX job_dep_job ON pqrun.job_dep (job_id);
