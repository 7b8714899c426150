/* STABLE, not IMMUTABLE: the answer depends on pqrun.cron_timezone. */
CREATE FUNCTION pqrun.cron_next(expr text, after timestamptz DEFAULT pg_catalog.now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_cron_next' LANGUAGE c STABLE STRICT PARALLEL SAFE;
