/* A token bucket for each concurrency key of the queue (concurrency_key
 * NULL: every key without a rate limit of its own), or for the one key
 * given: per_second tokens, at most burst; NULL removes it. */
CREATE FUNCTION pqrun.set_key_rate_limit(queue text, per_second double precision, burst int DEFAULT 1,
                                         concurrency_key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_key_rate_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
