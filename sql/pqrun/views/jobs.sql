CREATE VIEW pqrun.jobs AS
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       NULL::timestamptz AS finished_at, NULL::int AS duration_ms, NULL::jsonb AS result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_live
	UNION ALL
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       finished_at, duration_ms, result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_done;
