-- bench/lib/meta.sql — bookkeeping of the benchmark, in database bench_meta:
-- the per-transaction log of the last pgbench run (from --log) and, at the
-- end, the results CSV from which bench/lib/report.sql writes the report.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE TABLE lat (
	client int    NOT NULL,   -- pgbench client id
	txn    bigint NOT NULL,   -- transaction number of that client
	lat_us bigint NOT NULL,   -- latency of the transaction (one worker step)
	script int    NOT NULL,
	epoch  bigint NOT NULL,   -- completion time: seconds ...
	us     bigint NOT NULL,   -- ... and microseconds
	lag_us bigint             -- schedule lag (only with pgbench -R)
);
CREATE TABLE results (
	system     text    NOT NULL,
	workload   text    NOT NULL,
	clients    int     NOT NULL,
	round      int     NOT NULL,
	jobs_per_s numeric,
	p50_ms     numeric,
	p95_ms     numeric,
	notes      text
);
-- The fleet workloads (W7, W7h): how many of the workers' backends are in a
-- statement ("active", what pg_stat_activity and dashboards count) and how
-- many of those are not waiting for work ("busy": neither in pqrun's long
-- poll, wait event type Extension, nor in pg_sleep, type Timeout, as
-- pgmq's read_with_poll between its polls), every 100 ms.
CREATE TABLE activity (
	t         timestamptz NOT NULL,
	active    int         NOT NULL,
	busy      int         NOT NULL,
	connected int         NOT NULL
);
-- sample_activity(APP, SECONDS): a sample of the backends of application
-- APP every 100 ms for SECONDS. Each sample commits, so the next one reads
-- pg_stat_activity afresh (a transaction keeps the snapshot of it it took).
CREATE PROCEDURE sample_activity(app text, seconds float8)
LANGUAGE plpgsql AS $$
DECLARE
	stop_at timestamptz := clock_timestamp() + make_interval(secs => seconds);
BEGIN
	WHILE clock_timestamp() < stop_at LOOP
		INSERT INTO activity
		SELECT clock_timestamp(), count(*) FILTER (WHERE state = 'active'),
		       count(*) FILTER (WHERE state = 'active' AND wait_event_type IS DISTINCT FROM 'Extension'
		                        AND wait_event_type IS DISTINCT FROM 'Timeout'),
		       count(*)
		  FROM pg_stat_activity WHERE application_name = app;
		COMMIT;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;
