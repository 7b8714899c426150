CREATE VIEW pqrun.workers AS
	SELECT worker_id, pg_catalog.max(seen) AS last_seen, pg_catalog.sum(running)::int AS running_jobs
	  FROM (SELECT locked_by, GREATEST(locked_at, heartbeat_at), 1 FROM pqrun.job_live
	         WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
	        UNION ALL
	        SELECT locked_by, locked_at, 0 FROM pqrun.job_done
	         WHERE finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	        UNION ALL
	        SELECT worker_id, started_at, 0 FROM pqrun.attempt_log
	         WHERE finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	       ) AS seen_by(worker_id, seen, running)
	 WHERE worker_id IS NOT NULL
	   AND seen OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	 GROUP BY worker_id;
