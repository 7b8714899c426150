/* sql/pqrun--0.14.0--0.15.0.sql — ALTER EXTENSION pqrun UPDATE from 0.14.0.
 *
 * 0.15.0 adds pqrun.pickup_from(worker_id, queue, ...) and a last argument
 * `queue` to the job-id calls, by which Citus delegates them through the
 * coordinator to the node that holds the queue (README, "Running on
 * Citus"). The job-id calls are made anew, with their privileges; on Citus,
 * pqrun.distribute() delegates them again.
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.15.0'" to load this file. \quit

/* Who may execute the calls made anew (and pickup_from: who may pickup). */
DO $$
DECLARE
	grants text := '';
	f record;
BEGIN
	FOR f IN SELECT a.grantee, p.new FROM (VALUES
		('pqrun.mark_done(bigint, jsonb, uuid)', 'pqrun.mark_done(bigint, jsonb, uuid, text)'),
		('pqrun.mark_done_batch(bigint[], uuid[])', 'pqrun.mark_done_batch(bigint[], uuid[], text)'),
		('pqrun.mark_error(bigint, text, boolean, uuid, interval)', 'pqrun.mark_error(bigint, text, boolean, uuid, interval, text)'),
		('pqrun.heartbeat(bigint, uuid, jsonb, interval)', 'pqrun.heartbeat(bigint, uuid, jsonb, interval, text)'),
		('pqrun.release(bigint, uuid)', 'pqrun.release(bigint, uuid, text)'),
		('pqrun.snooze(bigint, interval, uuid)', 'pqrun.snooze(bigint, interval, uuid, text)'),
		('pqrun.cancel(bigint, text)', 'pqrun.cancel(bigint, text, text)'),
		('pqrun.retry(bigint)', 'pqrun.retry(bigint, text)'),
		('pqrun.pickup(text, text[], text[], int, interval)', 'pqrun.pickup_from(text, text, int, interval, text[])')) AS p(old, new),
	        pg_catalog.aclexplode((SELECT proacl FROM pg_catalog.pg_proc
	                                WHERE oid OPERATOR(pg_catalog.=) p.old::pg_catalog.regprocedure)) AS a
	         WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	           AND a.grantee OPERATOR(pg_catalog.<>) a.grantor LOOP
		grants := grants OPERATOR(pg_catalog.||) pg_catalog.format(E'GRANT EXECUTE ON FUNCTION %s TO %s\n', f.new,
			CASE WHEN f.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE f.grantee::pg_catalog.regrole::pg_catalog.text END);
	END LOOP;
	PERFORM pg_catalog.set_config('pqrun_upgrade.grants', grants, true);
END $$;

DROP FUNCTION pqrun.mark_done(bigint, jsonb, uuid),
	pqrun.mark_done_batch(bigint[], uuid[]),
	pqrun.mark_error(bigint, text, boolean, uuid, interval),
	pqrun.heartbeat(bigint, uuid, jsonb, interval),
	pqrun.release(bigint, uuid),
	pqrun.snooze(bigint, interval, uuid),
	pqrun.cancel(bigint, text),
	pqrun.retry(bigint);

/* ---- Consuming ---- */

/* A pickup from one queue. On Citus, a call through the coordinator runs on
 * the node that holds the queue (README, "Running on Citus"), as do the
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

CREATE FUNCTION pqrun.mark_done(job_id bigint, result jsonb DEFAULT NULL, lease_token uuid DEFAULT NULL,
                                queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_mark_done' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.mark_done_batch(job_ids bigint[], lease_tokens uuid[] DEFAULT NULL, queue text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'pqrun_mark_done_batch' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.mark_error(
	job_id      bigint,
	error       text,
	terminal    boolean  DEFAULT false,
	lease_token uuid     DEFAULT NULL,
	retry_after interval DEFAULT NULL,
	queue       text     DEFAULT NULL)
RETURNS pqrun.job_status
AS 'MODULE_PATHNAME', 'pqrun_mark_error' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.heartbeat(
	job_id      bigint,
	lease_token uuid     DEFAULT NULL,
	progress    jsonb    DEFAULT NULL,
	wait        interval DEFAULT '0',
	queue       text     DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_heartbeat' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.release(job_id bigint, lease_token uuid DEFAULT NULL, queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_release' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.snooze(job_id bigint, delay interval, lease_token uuid DEFAULT NULL, queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_snooze' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.cancel(job_id bigint, reason text DEFAULT NULL, queue text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_cancel' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.retry(job_id bigint, queue text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_retry' LANGUAGE c VOLATILE;

/* As every C function of the API (pqrun.sql, "Permissions"). */
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOREACH f IN ARRAY ARRAY['pqrun.mark_done(bigint, jsonb, uuid, text)', 'pqrun.mark_done_batch(bigint[], uuid[], text)',
	                         'pqrun.mark_error(bigint, text, boolean, uuid, interval, text)',
	                         'pqrun.heartbeat(bigint, uuid, jsonb, interval, text)', 'pqrun.release(bigint, uuid, text)',
	                         'pqrun.snooze(bigint, interval, uuid, text)', 'pqrun.cancel(bigint, text, text)',
	                         'pqrun.retry(bigint, text)', 'pqrun.pickup_from(text, text, int, interval, text[])']::regprocedure[] LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;
REVOKE ALL ON FUNCTION pqrun.mark_done(bigint, jsonb, uuid, text),
	pqrun.mark_done_batch(bigint[], uuid[], text),
	pqrun.mark_error(bigint, text, boolean, uuid, interval, text),
	pqrun.heartbeat(bigint, uuid, jsonb, interval, text),
	pqrun.release(bigint, uuid, text),
	pqrun.snooze(bigint, interval, uuid, text),
	pqrun.cancel(bigint, text, text),
	pqrun.retry(bigint, text),
	pqrun.pickup_from(text, text, int, interval, text[]) FROM PUBLIC;
DO $$
DECLARE
	g text;
BEGIN
	FOREACH g IN ARRAY pg_catalog.string_to_array(pg_catalog.rtrim(pg_catalog.current_setting('pqrun_upgrade.grants'), E'\n'), E'\n') LOOP
		EXECUTE g;
	END LOOP;
END $$;

/* ---- Roles ---- */

CREATE OR REPLACE FUNCTION pqrun.grant_producer(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int),'
	               ' pqrun.enqueue_batch(jsonb), pqrun.cancel(bigint, text, text) TO %s', role);
END $$;

CREATE OR REPLACE FUNCTION pqrun.grant_worker(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	EXECUTE format('GRANT SELECT ON pqrun.jobs TO %s', role);
	/* await_jobs cannot be SECURITY DEFINER (it commits): it reads job_live
	 * and the flow controls as its caller. */
	EXECUTE format('GRANT SELECT ON pqrun.job_live, pqrun.queue_control TO %s', role);
	EXECUTE format('GRANT EXECUTE ON FUNCTION pqrun.pickup(text, text[], text[], int, interval),'
	               ' pqrun.pickup_from(text, text, int, interval, text[]),'
	               ' pqrun.mark_done(bigint, jsonb, uuid, text), pqrun.mark_done_batch(bigint[], uuid[], text),'
	               ' pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int),'
	               ' pqrun.mark_error(bigint, text, boolean, uuid, interval, text),'
	               ' pqrun.heartbeat(bigint, uuid, jsonb, interval, text),'
	               ' pqrun.release(bigint, uuid, text), pqrun.snooze(bigint, interval, uuid, text),'
	               ' pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int),'
	               ' pqrun.enqueue_batch(jsonb) TO %s', role);
	EXECUTE format('GRANT EXECUTE ON PROCEDURE pqrun.await_jobs(text[], text[], interval, boolean) TO %s', role);
END $$;

/* ---- Citus ---- */

/* distribute spreads the queues over the nodes of a Citus cluster (README,
 * "Running on Citus"): job_live and job_done distributed by queue,
 * co-located, in shard_count shards; enqueue, schedule, the per-queue
 * controls, pickup_from and the job-id calls delegated by their queue to the
 * node that holds it. Called on the coordinator, by a superuser; a second
 * call only delegates the calls again. Citus's unique constraints must include the
 * distribution column, so the primary key becomes (id, queue) and dedupe
 * keys are unique per queue. */
CREATE OR REPLACE FUNCTION pqrun.distribute(shard_count int DEFAULT 32)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	holding text;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RAISE EXCEPTION 'Citus is not installed in this database' USING ERRCODE = '0A000';
	END IF;
	IF shard_count IS NULL OR shard_count OPERATOR(pg_catalog.<) 1 OR shard_count OPERATOR(pg_catalog.>) 64000 THEN
		RAISE EXCEPTION 'shard_count must be between 1 and 64000' USING ERRCODE = '22023';
	END IF;
	IF NOT pg_catalog.citus_is_coordinator() THEN
		RAISE EXCEPTION 'pqrun.distribute() runs on the coordinator' USING ERRCODE = '0A000';
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
	            WHERE logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass) THEN
		RAISE NOTICE 'pqrun''s tables are distributed already';
	ELSE
		/* A worker's own tables become the shells of the distributed ones:
		 * their jobs would be hidden. */
		SELECT pg_catalog.string_agg(r.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) r.nodeport, ', ')
		  INTO holding
		  FROM pg_catalog.run_command_on_workers(
		           'SELECT (SELECT pg_catalog.count(*) FROM (SELECT FROM pqrun.job_live LIMIT 1) l)'
		           ' OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM (SELECT FROM pqrun.job_done LIMIT 1) d)') r
		 WHERE NOT r.success OR r.result OPERATOR(pg_catalog.<>) '0';
		IF holding IS NOT NULL THEN
			RAISE EXCEPTION 'worker nodes hold jobs of their own: %', holding USING ERRCODE = '55000',
				HINT = 'Finish or purge them first: distributed, pqrun''s tables on a worker are shells whose rows are not read.';
		END IF;
		/* Schedules and queue controls are kept on the node of their queue;
		 * the coordinator's own would apply nowhere. */
		IF EXISTS (SELECT FROM pqrun.periodic) OR EXISTS (SELECT FROM pqrun.queue_control) THEN
			RAISE EXCEPTION 'the coordinator has schedules or queue controls' USING ERRCODE = '55000',
				HINT = 'Remove them, and make them again through the coordinator once the tables are distributed.';
		END IF;
		/* Ids unique across the cluster: Citus leaves an extension's sequence
		 * alone on the workers, so each node's counts from its group id << 48,
		 * as Citus's own sequences on workers do. */
		PERFORM pg_catalog.run_command_on_all_nodes(
			'SELECT pg_catalog.setval(''pqrun.job_id_seq'', GREATEST((SELECT last_value FROM pqrun.job_id_seq),'
			' ((SELECT groupid FROM pg_catalog.pg_dist_local_group)::bigint OPERATOR(pg_catalog.<<) 48)'
			' OPERATOR(pg_catalog.+) 1))');
		ALTER TABLE pqrun.job_live DROP CONSTRAINT job_live_pkey, ADD CONSTRAINT job_live_pkey PRIMARY KEY (id, queue);
		DROP INDEX pqrun.job_live_dedupe;
		CREATE UNIQUE INDEX job_live_dedupe ON pqrun.job_live (dedupe_key, queue) WHERE dedupe_key IS NOT NULL;
		PERFORM pg_catalog.create_distributed_table('pqrun.job_live', 'queue', shard_count => shard_count);
		PERFORM pg_catalog.create_distributed_table('pqrun.job_done', 'queue', colocate_with => 'pqrun.job_live');
	END IF;
	/* The delegated calls, again on a second call: ALTER EXTENSION pqrun
	 * UPDATE may have made some of them anew. */
	PERFORM pg_catalog.create_distributed_function(f::pg_catalog.regprocedure, 'queue', colocate_with => 'pqrun.job_live')
	   FROM pg_catalog.unnest(ARRAY[
	            'pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)',
	            'pqrun.pause_queue(text)', 'pqrun.resume_queue(text)',
	            'pqrun.set_concurrency_limit(text, int, text)',
	            'pqrun.set_rate_limit(text, double precision, int, text)',
	            'pqrun.set_key_limit(text, int, text)',
	            'pqrun.set_key_rate_limit(text, double precision, int, text)',
	            'pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean)',
	            'pqrun.pickup_from(text, text, int, interval, text[])',
	            'pqrun.mark_done(bigint, jsonb, uuid, text)', 'pqrun.mark_done_batch(bigint[], uuid[], text)',
	            'pqrun.mark_error(bigint, text, boolean, uuid, interval, text)',
	            'pqrun.heartbeat(bigint, uuid, jsonb, interval, text)', 'pqrun.release(bigint, uuid, text)',
	            'pqrun.snooze(bigint, interval, uuid, text)', 'pqrun.cancel(bigint, text, text)',
	            'pqrun.retry(bigint, text)']) AS f;
END $$;
