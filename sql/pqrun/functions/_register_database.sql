CREATE FUNCTION pqrun._register_database()
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_register_database' LANGUAGE c VOLATILE;
REVOKE ALL ON FUNCTION pqrun._register_database() FROM PUBLIC;
