/* The unfinished jobs waiting for job `job_id` (its pending dependency
 * edges, by their primary key), in id order, at most max_rows (NULL: 100;
 * 1,000 at most). */
CREATE FUNCTION pqrun.job_dependents(job_id bigint, max_rows int DEFAULT 100)
RETURNS TABLE (id bigint, queue text, job_type text, status pqrun.job_status)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
	SELECT j.id, j.queue, j.job_type, j.status
	  FROM pqrun.job_dep d JOIN pqrun.job_live j ON j.id = d.job_id
	 WHERE d.dep_id = $1
	 ORDER BY d.job_id
	 LIMIT LEAST(GREATEST(COALESCE($2, 100), 0), 1000)
$$;
REVOKE ALL ON FUNCTION pqrun.job_dependents(bigint, int) FROM PUBLIC;
