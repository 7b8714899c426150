CREATE FUNCTION pqrun.unschedule(name text, key text DEFAULT '')
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_unschedule' LANGUAGE c VOLATILE;
