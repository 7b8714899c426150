/* Give a running job back without using up its attempt: READY at once
 * (release) or after `delay` (snooze, counted in snoozes). */
CREATE FUNCTION pqrun.release(job_id bigint, lease_token uuid DEFAULT NULL, queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_release' LANGUAGE c VOLATILE;
