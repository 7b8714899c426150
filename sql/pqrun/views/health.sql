/* The backend holding back the vacuum horizon (the "death spiral" of every
 * table-based queue: dead rows nobody may remove) and pqrun's dead tuples. */
CREATE VIEW pqrun.health AS
	SELECT h.pid AS horizon_pid, h.usename AS horizon_user, h.state AS horizon_state,
	       h.xact_age AS horizon_xact_age, h.xact_start AS horizon_xact_start,
	       h.query_start AS horizon_query_start,
	       (SELECT n_dead_tup FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) 'pqrun.job_live'::regclass) AS job_live_dead_tuples,
	       (SELECT n_live_tup FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) 'pqrun.job_live'::regclass) AS job_live_live_tuples,
	       (SELECT pg_catalog.sum(n_dead_tup)::bigint FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT relid FROM pg_catalog.pg_partition_tree('pqrun.job_done'))))
	         AS job_done_dead_tuples,
	       (SELECT pg_catalog.sum(n_live_tup)::bigint FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT relid FROM pg_catalog.pg_partition_tree('pqrun.job_done'))))
	         AS job_done_live_tuples
	  FROM (SELECT 1) AS one
	  LEFT JOIN LATERAL (
	        SELECT pid, usename, state, xact_start, query_start,
	               GREATEST(pg_catalog.age(backend_xmin), pg_catalog.age(backend_xid)) AS xact_age
	          FROM pg_catalog.pg_stat_activity
	         WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
	           AND pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
	         ORDER BY 6 DESC NULLS LAST LIMIT 1) AS h ON true;
