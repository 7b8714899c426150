/* At most max_running jobs of the queue (of job_type in it, when given)
 * RUNNING at once; NULL removes the limit. */
CREATE FUNCTION pqrun.set_concurrency_limit(queue text, max_running int, job_type text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_concurrency_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
