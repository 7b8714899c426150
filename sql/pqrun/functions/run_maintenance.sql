CREATE FUNCTION pqrun.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pqrun_run_maintenance' LANGUAGE c VOLATILE;
