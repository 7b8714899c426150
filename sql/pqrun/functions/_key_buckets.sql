/* For each rate limit per key, the keys whose buckets are below full (the
 * others hold their burst) and those of them without a token now. */
CREATE FUNCTION pqrun._key_buckets(OUT control_id bigint, OUT keys int, OUT keys_without_token int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_key_buckets' LANGUAGE c VOLATILE ROWS 10
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
