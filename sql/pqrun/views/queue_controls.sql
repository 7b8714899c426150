/* Each control with what it holds back now: flow_controls and the READY
 * jobs it covers, counted from pqrun.job_live in one pass. */
CREATE VIEW pqrun.queue_controls AS
	WITH ready AS MATERIALIZED (
		SELECT j.queue, j.job_type, j.concurrency_key, pg_catalog.count(*) AS ready
		  FROM pqrun.job_live j
		 WHERE j.status OPERATOR(pg_catalog.=) 'READY'
		   AND j.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT queue FROM pqrun.queue_control))
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT f.queue, f.job_type, f.paused, f.max_running, f.running,
	       (SELECT COALESCE(pg_catalog.sum(r.ready), 0)::bigint FROM ready r
	         WHERE r.queue OPERATOR(pg_catalog.=) f.queue
	           AND (f.job_type IS NULL OR r.job_type OPERATOR(pg_catalog.=) f.job_type)
	           AND (f.concurrency_key IS NULL OR r.concurrency_key OPERATOR(pg_catalog.=) f.concurrency_key)) AS ready,
	       f.rate, f.burst, f.tokens, f.updated_at, f.concurrency_key, f.max_running_per_key, f.keyed,
	       f.busiest_key_running, f.rate_per_key, f.burst_per_key, f.rate_limited_keys
	  FROM pqrun.flow_controls f;
REVOKE ALL ON pqrun.queue_overview, pqrun.flow_controls FROM PUBLIC;
