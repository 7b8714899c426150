/* One row per (name, key) schedule. next_run is always one of the
 * schedule's slots (a cron fire time in pqrun.cron_timezone, or creation
 * time + k * run_every); firing moves it to the first slot after now(), so
 * missed slots fire once. Rows are user configuration, so pg_dump keeps them. */
CREATE TABLE pqrun.periodic (
	name        text        NOT NULL,
	key         text        NOT NULL DEFAULT '',
	job_type    text        NOT NULL,
	payload     jsonb       NOT NULL DEFAULT '{}',
	priority    int         NOT NULL DEFAULT 0,
	queue       text        NOT NULL DEFAULT 'default',
	cron        text,
	run_every   interval,
	active      boolean     NOT NULL DEFAULT true,
	next_run    timestamptz NOT NULL,
	last_run    timestamptz,
	last_job_id bigint,
	created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
	updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
	PRIMARY KEY (name, key),
	CHECK ((cron IS NULL) OPERATOR(pg_catalog.<>) (run_every IS NULL)),
	CHECK (run_every OPERATOR(pg_catalog.>) '0'::interval)
);
CREATE INDEX periodic_due ON pqrun.periodic (next_run) WHERE active;
SELECT pg_catalog.pg_extension_config_dump('pqrun.periodic', '');
