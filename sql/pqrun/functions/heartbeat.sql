/* Renews the lease and stores `progress` when given; with `wait`, first
 * sleeps until `wait` ends or the job stops being this lease's: 55000
 * (at once for a cancel), or, when its worker finished it, no error and
 * no renewal. */
CREATE FUNCTION pqrun.heartbeat(
	job_id      bigint,
	lease_token uuid     DEFAULT NULL,
	progress    jsonb    DEFAULT NULL,
	wait        interval DEFAULT '0',
	queue       text     DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_heartbeat' LANGUAGE c VOLATILE;
