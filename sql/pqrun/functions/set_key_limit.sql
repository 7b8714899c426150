/* At most max_running jobs of each concurrency key of the queue RUNNING at
 * once (concurrency_key NULL: the limit of every key without one of its
 * own), or of the one key given; NULL removes it. */
CREATE FUNCTION pqrun.set_key_limit(queue text, max_running int, concurrency_key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_key_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
