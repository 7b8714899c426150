/* queue_stats from the last count: what a dashboard or a scrape reads,
 * at the cost of the rows it returns. `oldest_ready_age` is as of
 * `counted_at`; done, failed and the last five minutes come from shared
 * memory now. */
CREATE VIEW pqrun.queue_overview AS
	SELECT l.queue, l.job_type, l.blocked, l.ready, l.delayed, l.running,
	       r.counted_at OPERATOR(pg_catalog.-) l.oldest_ready_at AS oldest_ready_age,
	       COALESCE(c.done, 0) AS done, COALESCE(c.failed, 0) AS failed, COALESCE(c.cancelled, 0) AS cancelled,
	       COALESCE(c.done_last_5min, 0) AS done_last_5min, c.errors_last_5min, c.enqueued_last_5min,
	       c.picked_last_5min, c.avg_duration_ms_last_5min, c.avg_wait_ms_last_5min, r.counted_at
	  FROM pqrun.live_counts l
	  LEFT JOIN pqrun.live_count_round r ON true
	  LEFT JOIN pqrun._queue_counters() c ON c.queue OPERATOR(pg_catalog.=) l.queue
	                                     AND c.job_type OPERATOR(pg_catalog.=) l.job_type;
