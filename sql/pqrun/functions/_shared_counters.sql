/* What only shared memory knows (src/api/sql_api.cpp): rescues by this
 * database's maintenance and how full pqrun's fixed-size tables are. */
CREATE FUNCTION pqrun._shared_counters(OUT metric text, OUT label text, OUT value bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_shared_counters' LANGUAGE c VOLATILE;
