/* A pickup from one queue. On Citus, a call through the coordinator runs on
 * the node that holds the queue (docs/citus.md), as do the
 * job-id calls below given their job's `queue`; anywhere, a job of another
 * queue than the one named is refused as an unknown one (P0002). */
CREATE FUNCTION pqrun.pickup_from(
	worker_id  text,
	queue      text,
	batch_size int      DEFAULT 1,
	wait       interval DEFAULT '0',
	job_types  text[]   DEFAULT NULL)
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_pickup_from' LANGUAGE c VOLATILE ROWS 1;
