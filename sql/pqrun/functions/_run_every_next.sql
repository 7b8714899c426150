CREATE FUNCTION pqrun._run_every_next(run_every interval, due timestamptz, after timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_run_every_next' LANGUAGE c STABLE STRICT PARALLEL SAFE;
