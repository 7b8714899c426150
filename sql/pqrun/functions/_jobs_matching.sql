/* The next `n` jobs after id `after_id` that match a filter (NULL: any),
 * finished ones from pqrun.job_done or unfinished ones from job_live, in
 * id order: retry_jobs and cancel_jobs walk them batch by batch. */
CREATE FUNCTION pqrun._jobs_matching(
	finished boolean, queue text, job_type text, statuses pqrun.job_status[],
	after_time timestamptz, before_time timestamptz, error_contains text, payload_contains jsonb,
	after_id bigint, n int)
RETURNS TABLE (job_id bigint, job_queue text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF finished THEN
		RETURN QUERY
		SELECT d.id, d.queue FROM pqrun.job_done d
		 WHERE d.status = ANY (statuses) AND d.id > after_id
		   AND (_jobs_matching.queue IS NULL OR d.queue = _jobs_matching.queue)
		   AND (_jobs_matching.job_type IS NULL OR d.job_type = _jobs_matching.job_type)
		   AND (after_time IS NULL OR d.finished_at >= after_time)
		   AND (before_time IS NULL OR d.finished_at < before_time)
		   AND (error_contains IS NULL OR strpos(lower(d.last_error), lower(error_contains)) > 0)
		   AND (payload_contains IS NULL OR d.payload @> payload_contains)
		 ORDER BY d.id LIMIT n;
	ELSE
		RETURN QUERY
		SELECT l.id, l.queue FROM pqrun.job_live l
		 WHERE l.status = ANY (statuses) AND l.id > after_id
		   AND (_jobs_matching.queue IS NULL OR l.queue = _jobs_matching.queue)
		   AND (_jobs_matching.job_type IS NULL OR l.job_type = _jobs_matching.job_type)
		   AND (after_time IS NULL OR l.created_at >= after_time)
		   AND (before_time IS NULL OR l.created_at < before_time)
		   AND (error_contains IS NULL OR strpos(lower(l.last_error), lower(error_contains)) > 0)
		   AND (payload_contains IS NULL OR l.payload @> payload_contains)
		 ORDER BY l.id LIMIT n;
	END IF;
END $$;
