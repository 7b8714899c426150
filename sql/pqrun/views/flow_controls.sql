/* queue_controls without the READY jobs each control holds back: the
 * RUNNING ones are counted (by job_live_running, a set as small as the
 * fleet), the backlog is not, and a condition on the controls' columns
 * reads only the controls it names (by queue_control_key). */
CREATE VIEW pqrun.flow_controls AS
	WITH running AS (
		SELECT j.queue, j.job_type, j.concurrency_key, pg_catalog.count(*) AS running
		  FROM pqrun.job_live j
		 WHERE j.status OPERATOR(pg_catalog.=) 'RUNNING'
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT c.queue, c.job_type, c.concurrency_key, c.paused, c.max_running,
	       (SELECT COALESCE(pg_catalog.sum(l.running), 0)::bigint FROM running l
	         WHERE l.queue OPERATOR(pg_catalog.=) c.queue
	           AND (c.job_type IS NULL OR l.job_type OPERATOR(pg_catalog.=) c.job_type)
	           AND (c.concurrency_key IS NULL OR l.concurrency_key OPERATOR(pg_catalog.=) c.concurrency_key)) AS running,
	       c.rate, c.burst,
	       CASE WHEN c.rate IS NOT NULL
	            THEN LEAST(c.burst, COALESCE(f.tokens OPERATOR(pg_catalog.+)
	                                         (c.rate OPERATOR(pg_catalog.*)
	                                          pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()
	                                                               OPERATOR(pg_catalog.-) f.refilled_at)),
	                                         c.burst)) END AS tokens,
	       c.max_running_per_key,
	       CASE WHEN c.job_type IS NULL AND c.concurrency_key IS NULL THEN
	           (SELECT COALESCE(pg_catalog.max(k.running), 0)::bigint
	              FROM (SELECT pg_catalog.sum(b.running) AS running FROM running b
	                     WHERE b.queue OPERATOR(pg_catalog.=) c.queue AND b.concurrency_key IS NOT NULL
	                     GROUP BY b.concurrency_key) k) END AS busiest_key_running,
	       c.rate_per_key, c.burst_per_key,
	       CASE WHEN c.rate_per_key IS NOT NULL THEN COALESCE(b.keys_without_token, 0) END AS rate_limited_keys,
	       c.keyed, c.updated_at
	  FROM pqrun.queue_control c
	  LEFT JOIN pqrun._flow_counters() f ON f.control_id OPERATOR(pg_catalog.=) c.id
	  LEFT JOIN pqrun._key_buckets() b ON b.control_id OPERATOR(pg_catalog.=) c.id;
