/* sql/pqrun--0.15.0--0.16.0.sql — ALTER EXTENSION pqrun UPDATE from 0.15.0.
 *
 * 0.16.0 indexes the READY jobs by job type, and by queue and job type, so
 * that a filtered pickup reads only its own lanes (README, "Consuming").
 * The library of 0.16.0 also holds claims by their leases unless a session
 * asks otherwise (pqrun.claim_hold) and leaves pqrun.notify off by default;
 * neither needs a change here. On Citus the indexes go to every shard.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.16.0'" to load this file. \quit

CREATE INDEX job_live_pick_type ON pqrun.job_live (job_type, (-(priority::bigint)), id)
	WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
CREATE INDEX job_live_pick_queue ON pqrun.job_live (queue, job_type, (-(priority::bigint)), id)
	WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
