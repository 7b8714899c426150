/* The unfinished jobs of each queue and job type as the database's
 * maintenance worker last counted them, every pqrun.count_interval (0.21.0):
 * pqrun.queue_overview and metrics() read as many rows as they show
 * instead of counting the backlog at every look. READY jobs due at the
 * count are `ready`, those due later `delayed`; `oldest_ready_at` is the
 * run_after of the oldest due one. A pair with no unfinished job keeps a row
 * of zeros while shared memory counts its finished jobs. Not dumped: it is
 * counted again. */
CREATE TABLE pqrun.live_counts (
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	blocked         bigint      NOT NULL,
	ready           bigint      NOT NULL,
	delayed         bigint      NOT NULL,
	running         bigint      NOT NULL,
	oldest_ready_at timestamptz,
	PRIMARY KEY (queue, job_type)
);
