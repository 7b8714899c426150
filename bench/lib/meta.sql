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
