/* A fresh lease token for each claimed row, called by pickup's claim (which
 * runs as the owner). Not SECURITY DEFINER: switching role and search_path on
 * every row would cost more than the token itself. */
CREATE FUNCTION pqrun._lease_token() RETURNS uuid
AS 'MODULE_PATHNAME', 'pqrun_lease_token' LANGUAGE c VOLATILE;
REVOKE ALL ON FUNCTION pqrun._lease_token() FROM PUBLIC;
