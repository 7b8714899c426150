/* At most `per_second` claims of the queue's jobs (of job_type's in it,
 * when given) per second on average, up to `burst` at once; NULL removes
 * the rate limit. */
CREATE FUNCTION pqrun.set_rate_limit(queue text, per_second double precision, burst int DEFAULT 1,
                                     job_type text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_rate_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
