/* Every grant_* function refuses what names no role (NULL, 0::regrole)
 * with 22023, instead of building a broken GRANT. */
CREATE FUNCTION pqrun._require_role(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF role IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role) THEN
		RAISE EXCEPTION 'role must name an existing role' USING ERRCODE = 'invalid_parameter_value';
	END IF;
END $$;
REVOKE ALL ON FUNCTION pqrun._require_role(regrole) FROM PUBLIC;
