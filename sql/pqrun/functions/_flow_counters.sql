/* The places taken in each limit and the tokens in each rate limit's
 * bucket as of its last refill, from shared memory (none for a control no
 * pickup used yet). */
CREATE FUNCTION pqrun._flow_counters(OUT control_id bigint, OUT places int, OUT tokens double precision,
                                     OUT refilled_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_flow_counters' LANGUAGE c VOLATILE ROWS 10
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
