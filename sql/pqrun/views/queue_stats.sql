CREATE VIEW pqrun.queue_stats AS
	WITH live AS (
		SELECT queue, job_type,
		       pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'BLOCKED') AS blocked,
		       pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'READY') AS ready,
		       pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'RUNNING') AS running,
		       pg_catalog.now() OPERATOR(pg_catalog.-) (pg_catalog.min(run_after)
		           FILTER (WHERE status OPERATOR(pg_catalog.=) 'READY'
		                   AND run_after OPERATOR(pg_catalog.<=) pg_catalog.now())) AS oldest_ready_age
		  FROM pqrun.job_live GROUP BY queue, job_type)
	SELECT queue, job_type,
	       COALESCE(l.blocked, 0) AS blocked, COALESCE(l.ready, 0) AS ready, COALESCE(l.running, 0) AS running,
	       COALESCE(c.done, 0) AS done, COALESCE(c.failed, 0) AS failed, COALESCE(c.cancelled, 0) AS cancelled,
	       l.oldest_ready_age, COALESCE(c.done_last_5min, 0) AS done_last_5min, c.avg_duration_ms_last_5min,
	       c.enqueued_last_5min, c.picked_last_5min, c.errors_last_5min, c.avg_wait_ms_last_5min
	  FROM live l FULL JOIN pqrun._queue_counters() c USING (queue, job_type);
