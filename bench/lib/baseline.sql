-- bench/lib/baseline.sql — the plain-SQL baseline the benchmark compares
-- pqrun with: the seed design, one jobs table with the columns of API.md's
-- pqrun.jobs and the one index its pickup needs (matching ORDER BY
-- priority DESC, id over READY rows). Pickup is
--   WITH picked AS (SELECT id ... FOR UPDATE SKIP LOCKED LIMIT n) UPDATE ... RETURNING *
-- and done is UPDATE ... SET status = 'DONE' WHERE id = $1 (see the
-- bench/workloads/baseline_*.sql scripts). Loaded into database bench_baseline.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS base CASCADE;
CREATE SCHEMA base;
CREATE TYPE base.job_status AS ENUM ('BLOCKED', 'READY', 'RUNNING', 'DONE', 'FAILED', 'CANCELLED');
CREATE TABLE base.jobs (
	id              bigserial   PRIMARY KEY,
	queue           text        NOT NULL DEFAULT 'default',
	job_type        text        NOT NULL,
	payload         jsonb       NOT NULL DEFAULT '{}',
	status          base.job_status NOT NULL DEFAULT 'READY',
	priority        int         NOT NULL DEFAULT 0,
	attempts        int         NOT NULL DEFAULT 0,
	max_attempts    int         NOT NULL DEFAULT 5,
	run_after       timestamptz NOT NULL DEFAULT now(),
	timeout_seconds int,
	locked_at       timestamptz,
	locked_by       text,
	lease_token     uuid,
	dedupe_key      text,
	fifo_key        text,
	depends_on      bigint[],
	last_error      text,
	finished_at     timestamptz,
	duration_ms     int,
	result          jsonb,
	created_at      timestamptz NOT NULL DEFAULT now(),
	updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_pick ON base.jobs (priority DESC, id) WHERE status = 'READY';
