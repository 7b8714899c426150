/* An operator (a dashboard, an on-call engineer) sees what a monitor sees
 * and may retry, cancel, pause and resume queues and set their limits; it
 * enqueues and claims nothing. */
CREATE FUNCTION pqrun.grant_operator(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'operator');
END $$;
REVOKE ALL ON FUNCTION pqrun.grant_operator(regrole) FROM PUBLIC;
