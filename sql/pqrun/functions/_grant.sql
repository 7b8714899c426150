/* _grant gives `role` schema pqrun and what pqrun._api() lists for `as`. */
CREATE FUNCTION pqrun._grant(role regrole, "as" text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	a record;
BEGIN
	PERFORM pqrun._require_role(role);
	EXECUTE format('GRANT USAGE ON SCHEMA pqrun TO %s', role);
	FOR a IN SELECT * FROM pqrun._api() WHERE "as" = ANY (roles) ORDER BY object LOOP
		EXECUTE format(CASE a.kind WHEN 'r' THEN 'GRANT SELECT ON %s TO %s'
		                           WHEN 'p' THEN 'GRANT EXECUTE ON PROCEDURE %s TO %s'
		                           ELSE 'GRANT EXECUTE ON FUNCTION %s TO %s' END, a.object, role);
	END LOOP;
END $$;
REVOKE ALL ON FUNCTION pqrun._grant(regrole, text) FROM PUBLIC;
