CREATE VIEW pqrun.job_attempts AS
	SELECT job_id, attempt, worker_id, started_at, finished_at, outcome, error
	  FROM pqrun.attempt_log
	UNION ALL
	SELECT id, attempts, locked_by, locked_at, NULL::timestamptz, NULL::text, NULL::text
	  FROM pqrun.job_live
	 WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
	UNION ALL
	SELECT id, attempts, locked_by, locked_at, finished_at, outcome,
	       CASE WHEN outcome OPERATOR(pg_catalog.=) 'done' THEN NULL ELSE last_error END
	  FROM pqrun.job_done
	 WHERE outcome IS NOT NULL;
