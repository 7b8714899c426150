/* distribute spreads the queues over the nodes of a Citus cluster (docs/citus.md): job_live and job_done distributed by queue,
 * co-located, in shard_count shards; enqueue, schedule, the per-queue
 * controls, pickup_from and the job-id calls delegated by their queue to the
 * node that holds it. Called on the coordinator, by a superuser; a second
 * call only delegates the calls again. Citus's unique constraints must include the
 * distribution column, so the primary key becomes (id, queue) and dedupe
 * keys are unique per queue. */
CREATE FUNCTION pqrun.distribute(shard_count int DEFAULT 32)
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
	/* The lanes of filtered pickups (0.16.0) of an install distributed
	 * before: its update left them to this call, since an index made in an
	 * extension's script does not reach the shards. */
	IF pg_catalog.to_regclass('pqrun.job_live_pick_type') IS NULL THEN
		CREATE INDEX job_live_pick_type ON pqrun.job_live (job_type, (-(priority::bigint)), id)
			WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
	END IF;
	IF pg_catalog.to_regclass('pqrun.job_live_pick_queue') IS NULL THEN
		CREATE INDEX job_live_pick_queue ON pqrun.job_live (queue, job_type, (-(priority::bigint)), id)
			WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
	END IF;
	/* The delegated calls, again on a second call: ALTER EXTENSION pqrun
	 * UPDATE may have made some of them anew. */
	PERFORM pg_catalog.create_distributed_function(a.object::pg_catalog.regprocedure, 'queue',
	                                               colocate_with => 'pqrun.job_live')
	   FROM pqrun._api() a WHERE a.delegated;
END $$;
