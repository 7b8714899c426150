/* Finished-job counts and recent activity come from shared-memory counters
 * (src/stats.cpp), so this view never scans the history; only unfinished
 * jobs are counted from the table. */
CREATE FUNCTION pqrun._queue_counters(
	OUT queue text, OUT job_type text, OUT done bigint, OUT failed bigint, OUT cancelled bigint,
	OUT enqueued_last_5min bigint, OUT picked_last_5min bigint, OUT done_last_5min bigint,
	OUT errors_last_5min bigint, OUT avg_duration_ms_last_5min double precision,
	OUT avg_wait_ms_last_5min double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_queue_counters' LANGUAGE c VOLATILE;
