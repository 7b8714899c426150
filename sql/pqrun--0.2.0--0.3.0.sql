/* sql/pqrun--0.2.0--0.3.0.sql — ALTER EXTENSION pqrun UPDATE from 0.2.0.
 *
 * 0.3.0 generates lease tokens with pqrun._lease_token() (a per-backend
 * generator seeded from the strong random source) instead of
 * gen_random_uuid(), which costs a system call per claimed job. The storage
 * is unchanged. Until the update runs, the library keeps using
 * gen_random_uuid().
 */
\echo Use "ALTER EXTENSION pqrun UPDATE TO '0.3.0'" to load this file. \quit

CREATE FUNCTION pqrun._lease_token() RETURNS uuid
AS 'MODULE_PATHNAME', 'pqrun_lease_token' LANGUAGE c VOLATILE;
REVOKE ALL ON FUNCTION pqrun._lease_token() FROM PUBLIC;
