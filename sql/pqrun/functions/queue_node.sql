/* queue_node answers the node that holds the queue's jobs once pqrun's
 * tables are distributed: where its workers connect. */
CREATE FUNCTION pqrun.queue_node(queue text, OUT host text, OUT port int)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF queue IS NULL THEN
		RAISE EXCEPTION 'queue must not be NULL' USING ERRCODE = '22023';
	END IF;
	/* Two statements: pg_dist_partition exists only with Citus. */
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RAISE EXCEPTION 'pqrun''s tables are not distributed by Citus' USING ERRCODE = '0A000';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
	                WHERE logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass) THEN
		RAISE EXCEPTION 'pqrun''s tables are not distributed by Citus' USING ERRCODE = '0A000';
	END IF;
	SELECT n.nodename, n.nodeport INTO host, port
	  FROM pg_catalog.pg_dist_placement p
	  JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid
	 WHERE p.shardid OPERATOR(pg_catalog.=) pg_catalog.get_shard_id_for_distribution_column('pqrun.job_live', queue)
	   AND n.isactive AND n.noderole OPERATOR(pg_catalog.=) 'primary';
END $$;
REVOKE ALL ON FUNCTION pqrun.queue_node(text) FROM PUBLIC;
