/* sql/pqrun--0.17.0--0.18.0.sql — ALTER EXTENSION pqrun UPDATE from 0.17.0.
 *
 * 0.18.0 forgets keyed queues: maintenance clears pqrun.queue_control's
 * `keyed` of a queue a minute after its last job with a concurrency key is
 * gone (and drops the row when nothing else is left in it), so that queues
 * a producer once gave keys do not cost every unfiltered pickup a look for
 * good (README, "Concurrency keys"). job_live_keyed finds whether a queue
 * still holds such a job with one descent.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.18.0'" to load this file. \quit

/* The queues that hold jobs with a concurrency key, whatever their status
 * (0.18.0): maintenance forgets a keyed queue (pqrun.queue_control's
 * `keyed`) once none is left, with one descent here instead of a scan
 * (src/jobs/keyed_queues.cpp). Not on a distributed install (Citus), where
 * maintenance does not forget keyed queues (README, "Running on Citus"),
 * and an index made in an extension's script would not reach the shards. */
DO $$
BEGIN
	IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
		IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
		            WHERE logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass) THEN
			RETURN;
		END IF;
	END IF;
	CREATE INDEX job_live_keyed ON pqrun.job_live (queue) WHERE concurrency_key IS NOT NULL;
END $$;
