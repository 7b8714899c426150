CREATE FUNCTION pqrun.schedule(
	name      text,
	job_type  text,
	cron      text     DEFAULT NULL,
	run_every interval DEFAULT NULL,
	payload   jsonb    DEFAULT '{}',
	priority  int      DEFAULT 0,
	key       text     DEFAULT '',
	queue     text     DEFAULT 'default',
	active    boolean  DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_schedule' LANGUAGE c VOLATILE;
