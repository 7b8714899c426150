/* job_done's partitions by range and their bounds (MINVALUE and MAXVALUE as
 * -infinity and infinity), as pg_get_expr shows them in UTC. */
CREATE FUNCTION pqrun._history_partitions()
RETURNS TABLE (part regclass, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET datestyle = 'ISO, YMD'
AS $$
	SELECT i.inhrelid::regclass,
	       CASE WHEN m[1] = 'MINVALUE' THEN '-infinity' ELSE btrim(m[1], '''') END::timestamptz,
	       CASE WHEN m[2] = 'MAXVALUE' THEN 'infinity' ELSE btrim(m[2], '''') END::timestamptz
	  FROM pg_inherits i, pg_class c,
	       regexp_match(pg_get_expr(c.relpartbound, c.oid), '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS m
	 WHERE i.inhparent = 'pqrun.job_done'::regclass AND c.oid = i.inhrelid AND m IS NOT NULL
	 ORDER BY 2
$$;
REVOKE ALL ON FUNCTION pqrun._history_partitions() FROM PUBLIC;
