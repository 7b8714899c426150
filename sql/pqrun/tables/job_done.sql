/* Finished jobs (DONE, FAILED, CANCELLED). Rows are inserted once and only
 * leave through purge/retention or retry. `outcome` is the outcome of the
 * final attempt when the job was running as it finished (the row then also
 * stands for that attempt in pqrun.job_attempts), NULL otherwise.
 *
 * Partitioned by finish time (0.12.0; docs/operations.md, "History and retention"): the workers make
 * a partition for each pqrun.history_interval ahead of time and apply
 * retention by dropping whole partitions, not by DELETE.
 * job_done_default holds what no partition covers: jobs finished before the
 * first partition was made, and FAILED jobs kept past their partition
 * (pqrun.failed_retention). A partitioned table's primary key would have to
 * include finished_at, so there is none: ids come from one sequence. Each
 * partition has its own indexes, on id and on the finish time of FAILED
 * jobs, made with it (pqrun._history_round), none on job_done itself:
 * pg_dump restores a partition's indexes after attaching it, which would
 * already have made those of a partitioned index. */
CREATE TABLE pqrun.job_done (
	id              bigint      NOT NULL,
	status          pqrun.job_status NOT NULL,
	priority        int         NOT NULL,
	attempts        int         NOT NULL,
	max_attempts    int         NOT NULL,
	timeout_seconds int,
	duration_ms     int,
	run_after       timestamptz NOT NULL,
	locked_at       timestamptz,
	finished_at     timestamptz NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	lease_token     uuid,
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	locked_by       text,
	dedupe_key      text,
	fifo_key        text,
	depends_on      bigint[],
	outcome         text,
	last_error      text,
	result          jsonb,
	payload         jsonb       NOT NULL,
	progress        jsonb,
	snoozes         int         NOT NULL DEFAULT 0,
	concurrency_key text,
	rate_weight     int,
	CHECK (status IN ('DONE', 'FAILED', 'CANCELLED'))
) PARTITION BY RANGE (finished_at);
