CREATE FUNCTION pqrun.reap_stale(default_stale_after interval DEFAULT '20 minutes')
RETURNS int
AS 'MODULE_PATHNAME', 'pqrun_reap_stale' LANGUAGE c VOLATILE;
