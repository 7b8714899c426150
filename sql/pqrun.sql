/* sql/pqrun.sql — editable source of the current install script.
 *
 * The Makefile copies it to sql/pqrun--<version>.sql. Storage (README,
 * "Storage design"): unfinished jobs live in the small, hot pqrun.job_live,
 * finished ones in the append-mostly pqrun.job_done, and pqrun.jobs is the
 * UNION ALL view users query. Every function body and default is
 * schema-qualified so a hostile search_path cannot change its meaning.
 */
\echo Use "CREATE EXTENSION pqrun" to load this file. \quit

CREATE TYPE pqrun.job_status AS ENUM ('BLOCKED', 'READY', 'RUNNING', 'DONE', 'FAILED', 'CANCELLED');

CREATE SEQUENCE pqrun.job_id_seq;

/* Unfinished jobs (BLOCKED, READY, RUNNING). Small by construction: a job
 * leaves it when it finishes, so pickup never wades through history.
 * `delayed` marks a READY job whose run_after was in the future when it was
 * written; it sits outside the pickup index until it is promoted. */
CREATE TABLE pqrun.job_live (
	id              bigint      NOT NULL DEFAULT pg_catalog.nextval('pqrun.job_id_seq'),
	status          pqrun.job_status NOT NULL,
	delayed         boolean     NOT NULL DEFAULT false,
	has_dependents  boolean     NOT NULL DEFAULT false,
	priority        int         NOT NULL,
	attempts        int         NOT NULL DEFAULT 0,
	max_attempts    int         NOT NULL,
	timeout_seconds int,
	holder_pid      int,
	run_after       timestamptz NOT NULL,
	locked_at       timestamptz,
	heartbeat_at    timestamptz,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	lease_token     uuid,
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	locked_by       text,
	dedupe_key      text,
	fifo_key        text,
	depends_on      bigint[],
	last_error      text,
	payload         jsonb       NOT NULL,
	PRIMARY KEY (id),
	CHECK (status IN ('BLOCKED', 'READY', 'RUNNING')),
	CHECK (NOT delayed OR status = 'READY')
) WITH (fillfactor = 90);

CREATE INDEX job_live_pick ON pqrun.job_live (priority DESC, id)
	WHERE status = 'READY' AND NOT delayed;
CREATE INDEX job_live_delayed ON pqrun.job_live (run_after) WHERE delayed;
CREATE INDEX job_live_running ON pqrun.job_live (locked_at) WHERE status = 'RUNNING';
CREATE INDEX job_live_blocked ON pqrun.job_live (id) WHERE status = 'BLOCKED';
CREATE UNIQUE INDEX job_live_dedupe ON pqrun.job_live (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX job_live_fifo ON pqrun.job_live (fifo_key, id) WHERE fifo_key IS NOT NULL;

/* Finished jobs (DONE, FAILED, CANCELLED). Rows are inserted once and only
 * leave through purge/retention or retry. `outcome` is the outcome of the
 * final attempt when the job was running as it finished (the row then also
 * stands for that attempt in pqrun.job_attempts), NULL otherwise. */
CREATE TABLE pqrun.job_done (
	id              bigint      NOT NULL,
	status          pqrun.job_status NOT NULL,
	priority        int         NOT NULL,
	attempts        int         NOT NULL,
	max_attempts    int         NOT NULL,
	timeout_seconds int,
	duration_ms     int,
	run_after       timestamptz NOT NULL,
	locked_at       timestamptz,
	finished_at     timestamptz NOT NULL,
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	lease_token     uuid,
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	locked_by       text,
	dedupe_key      text,
	fifo_key        text,
	depends_on      bigint[],
	outcome         text,
	last_error      text,
	result          jsonb,
	payload         jsonb       NOT NULL,
	PRIMARY KEY (id),
	CHECK (status IN ('DONE', 'FAILED', 'CANCELLED'))
);

CREATE INDEX job_done_finished ON pqrun.job_done USING brin (finished_at);
CREATE INDEX job_done_failed ON pqrun.job_done (finished_at) WHERE status = 'FAILED';

/* Attempts that ended with the job going back to READY (retry, stale,
 * orphaned), and final attempts of jobs re-queued by retry(). The running or
 * final attempt of a job is carried by its own row (see pqrun.job_attempts). */
CREATE TABLE pqrun.attempt_log (
	job_id      bigint      NOT NULL,
	attempt     int         NOT NULL,
	started_at  timestamptz,
	finished_at timestamptz,
	worker_id   text,
	outcome     text        NOT NULL,
	error       text,
	PRIMARY KEY (job_id, attempt)
);

/* Pending dependency edges: job_id waits for dep_id. An edge is deleted when
 * dep_id finishes DONE; a job whose last edge is gone becomes runnable. */
CREATE TABLE pqrun.job_dep (
	job_id bigint NOT NULL,
	dep_id bigint NOT NULL,
	PRIMARY KEY (dep_id, job_id)
);
CREATE INDEX job_dep_job ON pqrun.job_dep (job_id);

CREATE VIEW pqrun.jobs AS
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       NULL::timestamptz AS finished_at, NULL::int AS duration_ms, NULL::jsonb AS result,
	       created_at, updated_at
	  FROM pqrun.job_live
	UNION ALL
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       finished_at, duration_ms, result,
	       created_at, updated_at
	  FROM pqrun.job_done;

CREATE VIEW pqrun.job_attempts AS
	SELECT job_id, attempt, worker_id, started_at, finished_at, outcome, error
	  FROM pqrun.attempt_log
	UNION ALL
	SELECT id, attempts, locked_by, locked_at, NULL::timestamptz, NULL::text, NULL::text
	  FROM pqrun.job_live
	 WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
	UNION ALL
	SELECT id, attempts, locked_by, locked_at, finished_at, outcome,
	       CASE WHEN outcome OPERATOR(pg_catalog.=) 'done' THEN NULL ELSE last_error END
	  FROM pqrun.job_done
	 WHERE outcome IS NOT NULL;

/* ---- Producing ---------------------------------------------------------- */

CREATE FUNCTION pqrun.enqueue(
	job_type        text,
	payload         jsonb       DEFAULT '{}',
	priority        int         DEFAULT 0,
	run_after       timestamptz DEFAULT pg_catalog.now(),
	max_attempts    int         DEFAULT 5,
	timeout_seconds int         DEFAULT NULL,
	dedupe_key      text        DEFAULT NULL,
	queue           text        DEFAULT 'default',
	depends_on      bigint[]    DEFAULT NULL,
	fifo_key        text        DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_enqueue' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.enqueue_batch(jobs jsonb)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'pqrun_enqueue_batch' LANGUAGE c VOLATILE;

/* ---- Consuming ---------------------------------------------------------- */

CREATE FUNCTION pqrun.pickup(
	worker_id  text,
	job_types  text[]   DEFAULT NULL,
	queues     text[]   DEFAULT NULL,
	batch_size int      DEFAULT 1,
	wait       interval DEFAULT '0')
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_pickup' LANGUAGE c VOLATILE ROWS 1;

CREATE FUNCTION pqrun.mark_done(job_id bigint, result jsonb DEFAULT NULL, lease_token uuid DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_mark_done' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.mark_error(
	job_id      bigint,
	error       text,
	terminal    boolean  DEFAULT false,
	lease_token uuid     DEFAULT NULL,
	retry_after interval DEFAULT NULL)
RETURNS pqrun.job_status
AS 'MODULE_PATHNAME', 'pqrun_mark_error' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.heartbeat(job_id bigint, lease_token uuid DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_heartbeat' LANGUAGE c VOLATILE;

/* ---- Operating ---------------------------------------------------------- */

CREATE FUNCTION pqrun.reap_stale(default_stale_after interval DEFAULT '20 minutes')
RETURNS int
AS 'MODULE_PATHNAME', 'pqrun_reap_stale' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.cancel(job_id bigint, reason text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_cancel' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.retry(job_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_retry' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.purge(older_than interval, statuses pqrun.job_status[] DEFAULT '{DONE,CANCELLED}')
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_purge' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pqrun_run_maintenance' LANGUAGE c VOLATILE;

/* ---- Background workers ------------------------------------------------- */

CREATE FUNCTION pqrun._register_database()
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_register_database' LANGUAGE c VOLATILE;
REVOKE ALL ON FUNCTION pqrun._register_database() FROM PUBLIC;

/* Wake the launcher so this database gets its worker within a second. */
SELECT pqrun._register_database();
