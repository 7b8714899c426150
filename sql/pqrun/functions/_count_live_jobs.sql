/* Counts the unfinished jobs into pqrun.live_counts in one pass over
 * job_live, writing only the rows that changed, and answers how long it
 * took. The maintenance worker calls it (src/bgw/worker.cpp), and so may
 * the extension's owner; counts take turns by the advisory transaction
 * lock (1886483058, 2). */
CREATE FUNCTION pqrun._count_live_jobs()
RETURNS interval
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	started timestamptz := clock_timestamp();
BEGIN
	/* One count at a time: the last to start writes last. */
	PERFORM pg_advisory_xact_lock(1886483058, 2);
	WITH live AS MATERIALIZED (
		SELECT j.queue, j.job_type,
		       count(*) FILTER (WHERE j.status = 'BLOCKED') AS blocked,
		       count(*) FILTER (WHERE j.status = 'READY' AND j.run_after <= started) AS ready,
		       count(*) FILTER (WHERE j.status = 'READY' AND j.run_after > started) AS delayed,
		       count(*) FILTER (WHERE j.status = 'RUNNING') AS running,
		       min(j.run_after) FILTER (WHERE j.status = 'READY' AND j.run_after <= started) AS oldest_ready_at
		  FROM pqrun.job_live j
		 GROUP BY j.queue, j.job_type),
	     counted AS (
		SELECT * FROM live
		UNION ALL
		SELECT c.queue, c.job_type, 0, 0, 0, 0, NULL
		  FROM pqrun._queue_counters() c
		 WHERE NOT EXISTS (SELECT FROM live l WHERE l.queue = c.queue AND l.job_type = c.job_type)),
	     gone AS (
		DELETE FROM pqrun.live_counts o
		 WHERE NOT EXISTS (SELECT FROM counted n WHERE n.queue = o.queue AND n.job_type = o.job_type))
	INSERT INTO pqrun.live_counts AS o
	SELECT * FROM counted
	ON CONFLICT (queue, job_type) DO UPDATE
	   SET blocked = excluded.blocked, ready = excluded.ready, delayed = excluded.delayed,
	       running = excluded.running, oldest_ready_at = excluded.oldest_ready_at
	 WHERE (o.blocked, o.ready, o.delayed, o.running, o.oldest_ready_at)
	       IS DISTINCT FROM (excluded.blocked, excluded.ready, excluded.delayed, excluded.running, excluded.oldest_ready_at);
	INSERT INTO pqrun.live_count_round AS r (counted_at, took) VALUES (started, clock_timestamp() - started)
	ON CONFLICT (only_row) DO UPDATE SET counted_at = excluded.counted_at, took = excluded.took;
	RETURN clock_timestamp() - started;
END $$;
REVOKE ALL ON FUNCTION pqrun._count_live_jobs() FROM PUBLIC;
