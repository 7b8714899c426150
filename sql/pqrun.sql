/* sql/pqrun.sql — editable source of the current install script.
 *
 * The Makefile copies it to sql/pqrun--<version>.sql. Storage (docs/design.md): unfinished jobs live in the small, hot pqrun.job_live,
 * finished ones in the append-mostly pqrun.job_done, and pqrun.jobs is the
 * UNION ALL view users query. Every function body and default is
 * schema-qualified so a hostile search_path cannot change its meaning.
 */
\echo Use "CREATE EXTENSION pqrun" to load this file. \quit

CREATE SCHEMA pqrun;

CREATE TYPE pqrun.job_status AS ENUM ('BLOCKED', 'READY', 'RUNNING', 'DONE', 'FAILED', 'CANCELLED');

CREATE SEQUENCE pqrun.job_id_seq;

/* Unfinished jobs (BLOCKED, READY, RUNNING). Small by construction: a job
 * leaves it when it finishes, so pickup never wades through history.
 * `delayed` marks a READY job whose run_after was in the future when it was
 * written; it sits outside the pickup index until it is promoted. A running
 * job claimed under pqrun.claim_hold = session is held by the session with
 * process id holder_pid that started at holder_started (last, as ALTER
 * TABLE added it in 0.5.0); both are NULL for a job held by its lease. `progress` is
 * what the job's worker last reported with its heartbeat and `snoozes` how
 * often it was snoozed (0.8.0, last for the same reason), then its
 * concurrency key (0.10.0) and the tokens it takes from each rate limit
 * that applies to it (0.11.0, NULL: one). */
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
	holder_started  timestamptz,
	progress        jsonb,
	snoozes         int         NOT NULL DEFAULT 0,
	concurrency_key text,
	rate_weight     int,
	PRIMARY KEY (id),
	CHECK (status IN ('BLOCKED', 'READY', 'RUNNING')),
	CHECK (NOT delayed OR status = 'READY')
) WITH (fillfactor = 90);

/* Pickup order (priority DESC, id ASC) as one ascending key, so that a pickup
 * can start at a row comparison (src/wake.cpp, "pickup hint") instead of
 * walking dead entries at the head of the index. Jobs with a concurrency key
 * are in their lane instead (below). */
CREATE INDEX job_live_pick ON pqrun.job_live ((-(priority::bigint)), id)
	WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
/* The same jobs by job type, and by queue and job type, each in pickup
 * order (0.16.0): a pickup filtered by job type, by queue or by both reads
 * the heads of its lanes (one per job type, or per queue and job type) and
 * merges them, so what other queues and job types hold back costs it
 * nothing (src/jobs/pick_direct.cpp). */
CREATE INDEX job_live_pick_type ON pqrun.job_live (job_type, (-(priority::bigint)), id)
	WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
CREATE INDEX job_live_pick_queue ON pqrun.job_live (queue, job_type, (-(priority::bigint)), id)
	WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
/* One lane per (queue, concurrency_key), each in pickup order: a pickup
 * steps from key to key with one descent each, so a key at its limit is
 * passed over without reading its jobs (src/jobs/pick_lanes.cpp). Byte
 * order ("C"): the lanes' order is only the rotation's, and a descent then
 * compares bytes instead of calling the locale. */
CREATE INDEX job_live_lane ON pqrun.job_live (queue COLLATE pg_catalog."C", concurrency_key COLLATE pg_catalog."C",
                                               (-(priority::bigint)), id)
	WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NOT NULL;
/* The queues that hold jobs with a concurrency key, whatever their status
 * (0.18.0): maintenance forgets a keyed queue (pqrun.queue_control's
 * `keyed`) once none is left, with one descent here instead of a scan
 * (src/jobs/keyed_queues.cpp). */
CREATE INDEX job_live_keyed ON pqrun.job_live (queue) WHERE concurrency_key IS NOT NULL;
CREATE INDEX job_live_delayed ON pqrun.job_live (run_after) WHERE delayed;
/* Keyed by id, not locked_at: every statement that touches one running job
 * (mark, heartbeat, reap) then finds it by id whichever of the two indexes
 * its generic plan picks; the set of running jobs is small to scan whole. */
CREATE INDEX job_live_running ON pqrun.job_live (id) WHERE status = 'RUNNING';
CREATE INDEX job_live_blocked ON pqrun.job_live (id) WHERE status = 'BLOCKED';
CREATE UNIQUE INDEX job_live_dedupe ON pqrun.job_live (dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX job_live_fifo ON pqrun.job_live (fifo_key, id) WHERE fifo_key IS NOT NULL;

/* Finished jobs (DONE, FAILED, CANCELLED). Rows are inserted once and only
 * leave through purge/retention or retry. `outcome` is the outcome of the
 * final attempt when the job was running as it finished (the row then also
 * stands for that attempt in pqrun.job_attempts), NULL otherwise.
 *
 * Partitioned by finish time (0.12.0; docs/operations.md, "History and retention"): the workers make
 * a partition for each pqrun.history_interval ahead of time and apply
 * retention by dropping whole partitions, not by DELETE.
 * job_done_default holds what no partition covers: jobs finished before the
 * first partition was made, and FAILED jobs kept past their partition
 * (pqrun.failed_retention). A partitioned table's primary key would have to
 * include finished_at, so there is none: ids come from one sequence. Each
 * partition has its own indexes, on id and on the finish time of FAILED
 * jobs, made with it (pqrun._history_round), none on job_done itself:
 * pg_dump restores a partition's indexes after attaching it, which would
 * already have made those of a partitioned index. */
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
	progress        jsonb,
	snoozes         int         NOT NULL DEFAULT 0,
	concurrency_key text,
	rate_weight     int,
	CHECK (status IN ('DONE', 'FAILED', 'CANCELLED'))
) PARTITION BY RANGE (finished_at);

CREATE TABLE pqrun.job_done_default PARTITION OF pqrun.job_done DEFAULT;
CREATE INDEX job_done_default_id ON pqrun.job_done_default (id);
/* Its retention is by DELETE, in finish order. */
CREATE INDEX job_done_default_finished ON pqrun.job_done_default (finished_at);

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

/* Jobs are data, not part of the extension's definition: pg_dump keeps them,
 * their history and edges, and the id sequence (docs/backups.md). */
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_live', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_done_default', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.attempt_log', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_dep', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.job_id_seq', '');

CREATE VIEW pqrun.jobs AS
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       NULL::timestamptz AS finished_at, NULL::int AS duration_ms, NULL::jsonb AS result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
	  FROM pqrun.job_live
	UNION ALL
	SELECT id, queue, job_type, payload, status, priority, attempts, max_attempts,
	       run_after, timeout_seconds, locked_at, locked_by, lease_token, dedupe_key,
	       fifo_key, depends_on, last_error,
	       finished_at, duration_ms, result,
	       created_at, updated_at, progress, snoozes, concurrency_key, rate_weight
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
	fifo_key        text        DEFAULT NULL,
	concurrency_key text        DEFAULT NULL,
	rate_weight     int         DEFAULT NULL)
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

/* A pickup from one queue. On Citus, a call through the coordinator runs on
 * the node that holds the queue (docs/citus.md), as do the
 * job-id calls below given their job's `queue`; anywhere, a job of another
 * queue than the one named is refused as an unknown one (P0002). */
CREATE FUNCTION pqrun.pickup_from(
	worker_id  text,
	queue      text,
	batch_size int      DEFAULT 1,
	wait       interval DEFAULT '0',
	job_types  text[]   DEFAULT NULL)
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_pickup_from' LANGUAGE c VOLATILE ROWS 1;

CREATE FUNCTION pqrun.mark_done(job_id bigint, result jsonb DEFAULT NULL, lease_token uuid DEFAULT NULL,
                                queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_mark_done' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.mark_done_batch(job_ids bigint[], lease_tokens uuid[] DEFAULT NULL, queue text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'pqrun_mark_done_batch' LANGUAGE c VOLATILE;

/* Finish the jobs a worker completed and claim its next ones: one call,
 * one transaction, one WAL flush per job instead of two. Never waits: with
 * nothing to claim it returns no row at once. */
CREATE FUNCTION pqrun.mark_done_and_pickup(
	worker_id    text,
	job_ids      bigint[],
	lease_tokens uuid[]  DEFAULT NULL,
	results      jsonb[] DEFAULT NULL,
	job_types    text[]  DEFAULT NULL,
	queues       text[]  DEFAULT NULL,
	batch_size   int     DEFAULT 1)
RETURNS SETOF pqrun.jobs
AS 'MODULE_PATHNAME', 'pqrun_mark_done_and_pickup' LANGUAGE c VOLATILE ROWS 1;

CREATE FUNCTION pqrun.mark_error(
	job_id      bigint,
	error       text,
	terminal    boolean  DEFAULT false,
	lease_token uuid     DEFAULT NULL,
	retry_after interval DEFAULT NULL,
	queue       text     DEFAULT NULL)
RETURNS pqrun.job_status
AS 'MODULE_PATHNAME', 'pqrun_mark_error' LANGUAGE c VOLATILE;

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

/* Give a running job back without using up its attempt: READY at once
 * (release) or after `delay` (snooze, counted in snoozes). */
CREATE FUNCTION pqrun.release(job_id bigint, lease_token uuid DEFAULT NULL, queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_release' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.snooze(job_id bigint, delay interval, lease_token uuid DEFAULT NULL, queue text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_snooze' LANGUAGE c VOLATILE;

/* ---- Operating ---------------------------------------------------------- */

CREATE FUNCTION pqrun.reap_stale(default_stale_after interval DEFAULT '20 minutes')
RETURNS int
AS 'MODULE_PATHNAME', 'pqrun_reap_stale' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.cancel(job_id bigint, reason text DEFAULT NULL, queue text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_cancel' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.retry(job_id bigint, queue text DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_retry' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.purge(older_than interval, statuses pqrun.job_status[] DEFAULT '{DONE,CANCELLED}')
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_purge' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.run_maintenance()
RETURNS jsonb
AS 'MODULE_PATHNAME', 'pqrun_run_maintenance' LANGUAGE c VOLATILE;

CREATE PROCEDURE pqrun.await_jobs(
	job_types text[]   DEFAULT NULL,
	queues    text[]   DEFAULT NULL,
	wait      interval DEFAULT '30 seconds',
	INOUT ready boolean DEFAULT NULL)
AS 'MODULE_PATHNAME', 'pqrun_await_jobs' LANGUAGE c;

/* ---- Flow control --------------------------------------------------------- */

/* Pauses, concurrency limits and rate limits (docs/flow-control.md): per
 * queue (job_type NULL) a pause, a limit on its RUNNING jobs and a rate of
 * claims per second with a burst, per (queue, job_type) a limit and a rate.
 * Per concurrency key: the queue's row holds the limit of each key
 * (max_running_per_key) and whether it holds jobs with keys (keyed: pickups
 * then walk its lanes; set by the enqueue of its first keyed job, cleared by
 * maintenance a minute after its last is gone); a row of (queue, concurrency_key) holds that key's
 * own limit and rate. Pickups enforce them from shared memory, reloaded
 * when a change commits; rows are operators' configuration, so pg_dump
 * keeps them. */
CREATE TABLE pqrun.queue_control (
	id          bigint      GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
	queue       text        NOT NULL,
	job_type    text,
	paused      boolean     NOT NULL DEFAULT false,
	max_running int,
	rate        double precision,
	burst       int,
	updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
	concurrency_key     text,
	max_running_per_key int,
	keyed               boolean NOT NULL DEFAULT false,
	rate_per_key        double precision,
	burst_per_key       int,
	CONSTRAINT queue_control_key UNIQUE NULLS NOT DISTINCT (queue, job_type, concurrency_key),
	CHECK (max_running OPERATOR(pg_catalog.>=) 0),
	CHECK (rate OPERATOR(pg_catalog.>) 0 AND burst OPERATOR(pg_catalog.>=) 1),
	CHECK ((rate IS NULL) OPERATOR(pg_catalog.=) (burst IS NULL)),
	CHECK (job_type IS NULL OR NOT paused),
	CONSTRAINT queue_control_per_key CHECK (max_running_per_key OPERATOR(pg_catalog.>=) 0),
	CONSTRAINT queue_control_key_row CHECK (concurrency_key IS NULL OR (job_type IS NULL AND NOT paused)),
	CONSTRAINT queue_control_queue_row CHECK ((max_running_per_key IS NULL AND rate_per_key IS NULL AND NOT keyed)
	                                          OR (job_type IS NULL AND concurrency_key IS NULL)),
	CONSTRAINT queue_control_rate_per_key CHECK (rate_per_key OPERATOR(pg_catalog.>) 0
	                                             AND burst_per_key OPERATOR(pg_catalog.>=) 1),
	CONSTRAINT queue_control_rate_per_key_burst CHECK ((rate_per_key IS NULL) OPERATOR(pg_catalog.=)
	                                                   (burst_per_key IS NULL))
);
SELECT pg_catalog.pg_extension_config_dump('pqrun.queue_control', '');
SELECT pg_catalog.pg_extension_config_dump('pqrun.queue_control_id_seq', '');

/* Which queues' controls a statement changed (0.19.0), whoever wrote them:
 * each session then reads only those again, not the whole table
 * (src/api/sql_control.cpp, src/jobs/flow_control.cpp). A trigger may name
 * one event only when it has transition tables. */
CREATE FUNCTION pqrun._controls_changed() RETURNS trigger
AS 'MODULE_PATHNAME', 'pqrun_controls_changed' LANGUAGE c
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun._controls_changed() FROM PUBLIC;
CREATE TRIGGER controls_inserted AFTER INSERT ON pqrun.queue_control REFERENCING NEW TABLE AS inserted
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();
CREATE TRIGGER controls_updated AFTER UPDATE ON pqrun.queue_control
	REFERENCING OLD TABLE AS before_update NEW TABLE AS after_update
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();
CREATE TRIGGER controls_deleted AFTER DELETE ON pqrun.queue_control REFERENCING OLD TABLE AS deleted
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();
CREATE TRIGGER controls_truncated AFTER TRUNCATE ON pqrun.queue_control
	FOR EACH STATEMENT EXECUTE FUNCTION pqrun._controls_changed();

/* The places taken in each limit and the tokens in each rate limit's
 * bucket as of its last refill, from shared memory (none for a control no
 * pickup used yet). */
CREATE FUNCTION pqrun._flow_counters(OUT control_id bigint, OUT places int, OUT tokens double precision,
                                     OUT refilled_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_flow_counters' LANGUAGE c VOLATILE ROWS 10
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* For each rate limit per key, the keys whose buckets are below full (the
 * others hold their burst) and those of them without a token now. */
CREATE FUNCTION pqrun._key_buckets(OUT control_id bigint, OUT keys int, OUT keys_without_token int)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_key_buckets' LANGUAGE c VOLATILE ROWS 10
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* pause_queue stops pickups from claiming the queue's jobs (enqueues go
 * on); resume_queue lets them again. Each answers whether it changed
 * anything. */
CREATE FUNCTION pqrun.pause_queue(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_pause_queue' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION pqrun.resume_queue(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_resume_queue' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* At most max_running jobs of the queue (of job_type in it, when given)
 * RUNNING at once; NULL removes the limit. */
CREATE FUNCTION pqrun.set_concurrency_limit(queue text, max_running int, job_type text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_concurrency_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* At most `per_second` claims of the queue's jobs (of job_type's in it,
 * when given) per second on average, up to `burst` at once; NULL removes
 * the rate limit. */
CREATE FUNCTION pqrun.set_rate_limit(queue text, per_second double precision, burst int DEFAULT 1,
                                     job_type text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_rate_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* At most max_running jobs of each concurrency key of the queue RUNNING at
 * once (concurrency_key NULL: the limit of every key without one of its
 * own), or of the one key given; NULL removes it. */
CREATE FUNCTION pqrun.set_key_limit(queue text, max_running int, concurrency_key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_key_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

/* A token bucket for each concurrency key of the queue (concurrency_key
 * NULL: every key without a rate limit of its own), or for the one key
 * given: per_second tokens, at most burst; NULL removes it. */
CREATE FUNCTION pqrun.set_key_rate_limit(queue text, per_second double precision, burst int DEFAULT 1,
                                         concurrency_key text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_set_key_rate_limit' LANGUAGE c VOLATILE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION pqrun.pause_queue(text), pqrun.resume_queue(text),
	pqrun.set_concurrency_limit(text, int, text), pqrun.set_rate_limit(text, double precision, int, text),
	pqrun.set_key_limit(text, int, text), pqrun.set_key_rate_limit(text, double precision, int, text),
	pqrun._flow_counters(), pqrun._key_buckets() FROM PUBLIC;

/* ---- Observing ---------------------------------------------------------- */

/* Finished-job counts and recent activity come from shared-memory counters
 * (src/stats.cpp), so this view never scans the history; only unfinished
 * jobs are counted from the table. */
CREATE FUNCTION pqrun._queue_counters(
	OUT queue text, OUT job_type text, OUT done bigint, OUT failed bigint, OUT cancelled bigint,
	OUT enqueued_last_5min bigint, OUT picked_last_5min bigint, OUT done_last_5min bigint,
	OUT errors_last_5min bigint, OUT avg_duration_ms_last_5min double precision,
	OUT avg_wait_ms_last_5min double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_queue_counters' LANGUAGE c VOLATILE;

CREATE VIEW pqrun.queue_stats AS
	WITH live AS (
		SELECT queue, job_type,
		       pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'BLOCKED') AS blocked,
		       pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'READY') AS ready,
		       pg_catalog.count(*) FILTER (WHERE status OPERATOR(pg_catalog.=) 'RUNNING') AS running,
		       pg_catalog.now() OPERATOR(pg_catalog.-) (pg_catalog.min(run_after)
		           FILTER (WHERE status OPERATOR(pg_catalog.=) 'READY'
		                   AND run_after OPERATOR(pg_catalog.<=) pg_catalog.now())) AS oldest_ready_age
		  FROM pqrun.job_live GROUP BY queue, job_type)
	SELECT queue, job_type,
	       COALESCE(l.blocked, 0) AS blocked, COALESCE(l.ready, 0) AS ready, COALESCE(l.running, 0) AS running,
	       COALESCE(c.done, 0) AS done, COALESCE(c.failed, 0) AS failed, COALESCE(c.cancelled, 0) AS cancelled,
	       l.oldest_ready_age, COALESCE(c.done_last_5min, 0) AS done_last_5min, c.avg_duration_ms_last_5min,
	       c.enqueued_last_5min, c.picked_last_5min, c.errors_last_5min, c.avg_wait_ms_last_5min
	  FROM live l FULL JOIN pqrun._queue_counters() c USING (queue, job_type);

/* The unfinished jobs of each queue and job type as the database's
 * maintenance worker last counted them, every pqrun.count_interval (0.21.0):
 * pqrun.queue_overview and metrics() read as many rows as they show
 * instead of counting the backlog at every look. READY jobs due at the
 * count are `ready`, those due later `delayed`; `oldest_ready_at` is the
 * run_after of the oldest due one. A pair with no unfinished job keeps a row
 * of zeros while shared memory counts its finished jobs. Not dumped: it is
 * counted again. */
CREATE TABLE pqrun.live_counts (
	queue           text        NOT NULL,
	job_type        text        NOT NULL,
	blocked         bigint      NOT NULL,
	ready           bigint      NOT NULL,
	delayed         bigint      NOT NULL,
	running         bigint      NOT NULL,
	oldest_ready_at timestamptz,
	PRIMARY KEY (queue, job_type)
);
/* When that count was taken and how long it took: one row. */
CREATE TABLE pqrun.live_count_round (
	counted_at timestamptz NOT NULL,
	took       interval    NOT NULL,
	only_row   boolean     NOT NULL DEFAULT true PRIMARY KEY CHECK (only_row)
);
REVOKE ALL ON pqrun.live_counts, pqrun.live_count_round FROM PUBLIC;

/* Counts the unfinished jobs into pqrun.live_counts in one pass over
 * job_live, writing only the rows that changed, and answers how long it
 * took. The maintenance worker calls it (src/bgw/worker.cpp), and so may
 * the extension's owner; counts take turns by the advisory transaction
 * lock (1886483058, 2). */
CREATE FUNCTION pqrun._count_live_jobs()
RETURNS interval
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	started timestamptz := clock_timestamp();
BEGIN
	/* One count at a time: the last to start writes last. */
	PERFORM pg_advisory_xact_lock(1886483058, 2);
	WITH live AS MATERIALIZED (
		SELECT j.queue, j.job_type,
		       count(*) FILTER (WHERE j.status = 'BLOCKED') AS blocked,
		       count(*) FILTER (WHERE j.status = 'READY' AND j.run_after <= started) AS ready,
		       count(*) FILTER (WHERE j.status = 'READY' AND j.run_after > started) AS delayed,
		       count(*) FILTER (WHERE j.status = 'RUNNING') AS running,
		       min(j.run_after) FILTER (WHERE j.status = 'READY' AND j.run_after <= started) AS oldest_ready_at
		  FROM pqrun.job_live j
		 GROUP BY j.queue, j.job_type),
	     counted AS (
		SELECT * FROM live
		UNION ALL
		SELECT c.queue, c.job_type, 0, 0, 0, 0, NULL
		  FROM pqrun._queue_counters() c
		 WHERE NOT EXISTS (SELECT FROM live l WHERE l.queue = c.queue AND l.job_type = c.job_type)),
	     gone AS (
		DELETE FROM pqrun.live_counts o
		 WHERE NOT EXISTS (SELECT FROM counted n WHERE n.queue = o.queue AND n.job_type = o.job_type))
	INSERT INTO pqrun.live_counts AS o
	SELECT * FROM counted
	ON CONFLICT (queue, job_type) DO UPDATE
	   SET blocked = excluded.blocked, ready = excluded.ready, delayed = excluded.delayed,
	       running = excluded.running, oldest_ready_at = excluded.oldest_ready_at
	 WHERE (o.blocked, o.ready, o.delayed, o.running, o.oldest_ready_at)
	       IS DISTINCT FROM (excluded.blocked, excluded.ready, excluded.delayed, excluded.running, excluded.oldest_ready_at);
	INSERT INTO pqrun.live_count_round AS r (counted_at, took) VALUES (started, clock_timestamp() - started)
	ON CONFLICT (only_row) DO UPDATE SET counted_at = excluded.counted_at, took = excluded.took;
	RETURN clock_timestamp() - started;
END $$;
REVOKE ALL ON FUNCTION pqrun._count_live_jobs() FROM PUBLIC;

/* queue_stats from the last count: what a dashboard or a scrape reads,
 * at the cost of the rows it returns. `oldest_ready_age` is as of
 * `counted_at`; done, failed and the last five minutes come from shared
 * memory now. */
CREATE VIEW pqrun.queue_overview AS
	SELECT l.queue, l.job_type, l.blocked, l.ready, l.delayed, l.running,
	       r.counted_at OPERATOR(pg_catalog.-) l.oldest_ready_at AS oldest_ready_age,
	       COALESCE(c.done, 0) AS done, COALESCE(c.failed, 0) AS failed, COALESCE(c.cancelled, 0) AS cancelled,
	       COALESCE(c.done_last_5min, 0) AS done_last_5min, c.errors_last_5min, c.enqueued_last_5min,
	       c.picked_last_5min, c.avg_duration_ms_last_5min, c.avg_wait_ms_last_5min, r.counted_at
	  FROM pqrun.live_counts l
	  LEFT JOIN pqrun.live_count_round r ON true
	  LEFT JOIN pqrun._queue_counters() c ON c.queue OPERATOR(pg_catalog.=) l.queue
	                                     AND c.job_type OPERATOR(pg_catalog.=) l.job_type;

/* queue_controls without the READY jobs each control holds back: the
 * RUNNING ones are counted (by job_live_running, a set as small as the
 * fleet), the backlog is not, and a condition on the controls' columns
 * reads only the controls it names (by queue_control_key). */
CREATE VIEW pqrun.flow_controls AS
	WITH running AS (
		SELECT j.queue, j.job_type, j.concurrency_key, pg_catalog.count(*) AS running
		  FROM pqrun.job_live j
		 WHERE j.status OPERATOR(pg_catalog.=) 'RUNNING'
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT c.queue, c.job_type, c.concurrency_key, c.paused, c.max_running,
	       (SELECT COALESCE(pg_catalog.sum(l.running), 0)::bigint FROM running l
	         WHERE l.queue OPERATOR(pg_catalog.=) c.queue
	           AND (c.job_type IS NULL OR l.job_type OPERATOR(pg_catalog.=) c.job_type)
	           AND (c.concurrency_key IS NULL OR l.concurrency_key OPERATOR(pg_catalog.=) c.concurrency_key)) AS running,
	       c.rate, c.burst,
	       CASE WHEN c.rate IS NOT NULL
	            THEN LEAST(c.burst, COALESCE(f.tokens OPERATOR(pg_catalog.+)
	                                         (c.rate OPERATOR(pg_catalog.*)
	                                          pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()
	                                                               OPERATOR(pg_catalog.-) f.refilled_at)),
	                                         c.burst)) END AS tokens,
	       c.max_running_per_key,
	       CASE WHEN c.job_type IS NULL AND c.concurrency_key IS NULL THEN
	           (SELECT COALESCE(pg_catalog.max(k.running), 0)::bigint
	              FROM (SELECT pg_catalog.sum(b.running) AS running FROM running b
	                     WHERE b.queue OPERATOR(pg_catalog.=) c.queue AND b.concurrency_key IS NOT NULL
	                     GROUP BY b.concurrency_key) k) END AS busiest_key_running,
	       c.rate_per_key, c.burst_per_key,
	       CASE WHEN c.rate_per_key IS NOT NULL THEN COALESCE(b.keys_without_token, 0) END AS rate_limited_keys,
	       c.keyed, c.updated_at
	  FROM pqrun.queue_control c
	  LEFT JOIN pqrun._flow_counters() f ON f.control_id OPERATOR(pg_catalog.=) c.id
	  LEFT JOIN pqrun._key_buckets() b ON b.control_id OPERATOR(pg_catalog.=) c.id;
/* Each control with what it holds back now: flow_controls and the READY
 * jobs it covers, counted from pqrun.job_live in one pass. */
CREATE VIEW pqrun.queue_controls AS
	WITH ready AS MATERIALIZED (
		SELECT j.queue, j.job_type, j.concurrency_key, pg_catalog.count(*) AS ready
		  FROM pqrun.job_live j
		 WHERE j.status OPERATOR(pg_catalog.=) 'READY'
		   AND j.queue OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT queue FROM pqrun.queue_control))
		 GROUP BY j.queue, j.job_type, j.concurrency_key)
	SELECT f.queue, f.job_type, f.paused, f.max_running, f.running,
	       (SELECT COALESCE(pg_catalog.sum(r.ready), 0)::bigint FROM ready r
	         WHERE r.queue OPERATOR(pg_catalog.=) f.queue
	           AND (f.job_type IS NULL OR r.job_type OPERATOR(pg_catalog.=) f.job_type)
	           AND (f.concurrency_key IS NULL OR r.concurrency_key OPERATOR(pg_catalog.=) f.concurrency_key)) AS ready,
	       f.rate, f.burst, f.tokens, f.updated_at, f.concurrency_key, f.max_running_per_key, f.keyed,
	       f.busiest_key_running, f.rate_per_key, f.burst_per_key, f.rate_limited_keys
	  FROM pqrun.flow_controls f;
REVOKE ALL ON pqrun.queue_overview, pqrun.flow_controls FROM PUBLIC;

/* The unfinished jobs waiting for job `job_id` (its pending dependency
 * edges, by their primary key), in id order, at most max_rows (NULL: 100;
 * 1,000 at most). */
CREATE FUNCTION pqrun.job_dependents(job_id bigint, max_rows int DEFAULT 100)
RETURNS TABLE (id bigint, queue text, job_type text, status pqrun.job_status)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
	SELECT j.id, j.queue, j.job_type, j.status
	  FROM pqrun.job_dep d JOIN pqrun.job_live j ON j.id = d.job_id
	 WHERE d.dep_id = $1
	 ORDER BY d.job_id
	 LIMIT LEAST(GREATEST(COALESCE($2, 100), 0), 1000)
$$;
REVOKE ALL ON FUNCTION pqrun.job_dependents(bigint, int) FROM PUBLIC;

CREATE VIEW pqrun.workers AS
	SELECT worker_id, pg_catalog.max(seen) AS last_seen, pg_catalog.sum(running)::int AS running_jobs
	  FROM (SELECT locked_by, GREATEST(locked_at, heartbeat_at), 1 FROM pqrun.job_live
	         WHERE status OPERATOR(pg_catalog.=) 'RUNNING'
	        UNION ALL
	        SELECT locked_by, locked_at, 0 FROM pqrun.job_done
	         WHERE finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	        UNION ALL
	        SELECT worker_id, started_at, 0 FROM pqrun.attempt_log
	         WHERE finished_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	       ) AS seen_by(worker_id, seen, running)
	 WHERE worker_id IS NOT NULL
	   AND seen OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) '1 hour'::interval)
	 GROUP BY worker_id;

/* The backend holding back the vacuum horizon (the "death spiral" of every
 * table-based queue: dead rows nobody may remove) and pqrun's dead tuples. */
CREATE VIEW pqrun.health AS
	SELECT h.pid AS horizon_pid, h.usename AS horizon_user, h.state AS horizon_state,
	       h.xact_age AS horizon_xact_age, h.xact_start AS horizon_xact_start,
	       h.query_start AS horizon_query_start,
	       (SELECT n_dead_tup FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) 'pqrun.job_live'::regclass) AS job_live_dead_tuples,
	       (SELECT n_live_tup FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) 'pqrun.job_live'::regclass) AS job_live_live_tuples,
	       (SELECT pg_catalog.sum(n_dead_tup)::bigint FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT relid FROM pg_catalog.pg_partition_tree('pqrun.job_done'))))
	         AS job_done_dead_tuples,
	       (SELECT pg_catalog.sum(n_live_tup)::bigint FROM pg_catalog.pg_stat_user_tables
	         WHERE relid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT relid FROM pg_catalog.pg_partition_tree('pqrun.job_done'))))
	         AS job_done_live_tuples
	  FROM (SELECT 1) AS one
	  LEFT JOIN LATERAL (
	        SELECT pid, usename, state, xact_start, query_start,
	               GREATEST(pg_catalog.age(backend_xmin), pg_catalog.age(backend_xid)) AS xact_age
	          FROM pg_catalog.pg_stat_activity
	         WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
	           AND pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()
	         ORDER BY 6 DESC NULLS LAST LIMIT 1) AS h ON true;

/* A label value quoted as the Prometheus text format wants it: only
 * backslash, double quote and line feed escaped (to_json's JSON escapes,
 * \t or \u0001, are not the format's: promtool refuses the whole text). */
CREATE FUNCTION pqrun._label(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '"' OPERATOR(pg_catalog.||)
       pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(value, E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
       OPERATOR(pg_catalog.||) '"';

/* What only shared memory knows (src/api/sql_api.cpp): rescues by this
 * database's maintenance and how full pqrun's fixed-size tables are. */
CREATE FUNCTION pqrun._shared_counters(OUT metric text, OUT label text, OUT value bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'pqrun_shared_counters' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun.metrics()
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
/* Its plan is large and costed for a backlog it does not read: compiling
 * it took seconds. */
SET jit = off
AS $$
	/* The unfinished jobs as the maintenance worker last counted them
	 * (queue_overview), or counted here (queue_stats) where no count was
	 * taken yet; the flow controls without their READY jobs; each read
	 * once, as is shared memory. */
	WITH qs AS MATERIALIZED (
	       SELECT queue, job_type, blocked, ready OPERATOR(pg_catalog.+) delayed AS ready, running, done, failed,
	              cancelled, oldest_ready_age, done_last_5min, enqueued_last_5min, picked_last_5min,
	              errors_last_5min, counted_at
	         FROM pqrun.queue_overview
	       UNION ALL
	       SELECT queue, job_type, blocked, ready, running, done, failed, cancelled, oldest_ready_age,
	              done_last_5min, enqueued_last_5min, picked_last_5min, errors_last_5min, NULL
	         FROM pqrun.queue_stats WHERE NOT EXISTS (SELECT FROM pqrun.queue_overview)),
	     qc AS MATERIALIZED (SELECT * FROM pqrun.flow_controls),
	     sc AS MATERIALIZED (SELECT * FROM pqrun._shared_counters())
	SELECT pg_catalog.concat_ws(E'\n',
	  '# HELP pqrun_jobs Jobs by queue, job type and status.',
	  '# TYPE pqrun_jobs gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_jobs{queue=%s,job_type=%s,status="%s"} %s',
	           pqrun._label(s.queue), pqrun._label(s.job_type), st.status, st.n), E'\n'
	           ORDER BY s.queue, s.job_type, st.status)
	     FROM qs s,
	          LATERAL (VALUES ('BLOCKED', s.blocked), ('READY', s.ready), ('RUNNING', s.running),
	                          ('DONE', s.done), ('FAILED', s.failed), ('CANCELLED', s.cancelled)) AS st(status, n)),
	  '# HELP pqrun_oldest_ready_age_seconds Age of the oldest runnable job when the jobs were counted.',
	  '# TYPE pqrun_oldest_ready_age_seconds gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_oldest_ready_age_seconds{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type),
	           COALESCE(pg_catalog.date_part('epoch', oldest_ready_age), 0)), E'\n' ORDER BY queue, job_type)
	     FROM qs),
	  '# HELP pqrun_done_last_5min Jobs finished DONE in the last five minutes.',
	  '# TYPE pqrun_done_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_done_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), done_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs),
	  '# HELP pqrun_live_counts_age_seconds Age of the counts of unfinished jobs in pqrun_jobs (0: counted by this scrape).',
	  '# TYPE pqrun_live_counts_age_seconds gauge',
	  (SELECT pg_catalog.format('pqrun_live_counts_age_seconds %s',
	           COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) pg_catalog.max(counted_at)), 0))
	     FROM qs),
	  '# HELP pqrun_horizon_xact_age Transaction age (in XIDs) of the backend holding back vacuum.',
	  '# TYPE pqrun_horizon_xact_age gauge',
	  (SELECT pg_catalog.format('pqrun_horizon_xact_age %s', COALESCE(horizon_xact_age, 0)) FROM pqrun.health),
	  '# HELP pqrun_dead_tuples Dead tuples in pqrun''s tables.',
	  '# TYPE pqrun_dead_tuples gauge',
	  (SELECT pg_catalog.format(E'pqrun_dead_tuples{table="job_live"} %s\npqrun_dead_tuples{table="job_done"} %s',
	           COALESCE(job_live_dead_tuples, 0), COALESCE(job_done_dead_tuples, 0)) FROM pqrun.health),
	  '# HELP pqrun_queue_paused Whether pickups skip the queue (pqrun.pause_queue).',
	  '# TYPE pqrun_queue_paused gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_queue_paused{queue=%s} %s',
	           pqrun._label(queue), CASE WHEN paused THEN 1 ELSE 0 END), E'\n' ORDER BY queue)
	     FROM qc WHERE job_type IS NULL),
	  '# HELP pqrun_concurrency_limit Most jobs RUNNING at once (pqrun.set_concurrency_limit; job_type "" for the queue).',
	  '# TYPE pqrun_concurrency_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_concurrency_limit{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), max_running), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE max_running IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_concurrency_running Jobs RUNNING under a concurrency limit.',
	  '# TYPE pqrun_concurrency_running gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_concurrency_running{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), running), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE max_running IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_key_limit Most jobs of one concurrency key RUNNING at once (pqrun.set_key_limit; concurrency_key "" for every key without its own).',
	  '# TYPE pqrun_key_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_limit{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN max_running_per_key ELSE max_running END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM qc
	    WHERE (concurrency_key IS NOT NULL AND max_running IS NOT NULL) OR max_running_per_key IS NOT NULL),
	  '# HELP pqrun_key_running Jobs RUNNING of the concurrency key (concurrency_key "": of the busiest key without a limit of its own).',
	  '# TYPE pqrun_key_running gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_running{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN busiest_key_running ELSE running END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM qc
	    WHERE (concurrency_key IS NOT NULL AND max_running IS NOT NULL) OR max_running_per_key IS NOT NULL),
	  '# HELP pqrun_rate_limit Most claims per second (pqrun.set_rate_limit; job_type "" for the queue).',
	  '# TYPE pqrun_rate_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rate_limit{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), rate), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE rate IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_rate_tokens Claims a rate limit allows at once now.',
	  '# TYPE pqrun_rate_tokens gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rate_tokens{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(job_type, '')), tokens), E'\n'
	           ORDER BY queue, job_type NULLS FIRST)
	     FROM qc WHERE rate IS NOT NULL AND concurrency_key IS NULL),
	  '# HELP pqrun_key_rate_limit Most claims per second of one concurrency key (pqrun.set_key_rate_limit; concurrency_key "" for every key without its own).',
	  '# TYPE pqrun_key_rate_limit gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_limit{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(COALESCE(concurrency_key, '')),
	           CASE WHEN concurrency_key IS NULL THEN rate_per_key ELSE rate END), E'\n'
	           ORDER BY queue, concurrency_key NULLS FIRST)
	     FROM qc
	    WHERE (concurrency_key IS NOT NULL AND rate IS NOT NULL) OR rate_per_key IS NOT NULL),
	  '# HELP pqrun_key_rate_tokens Claims a key''s own rate limit allows at once now.',
	  '# TYPE pqrun_key_rate_tokens gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_tokens{queue=%s,concurrency_key=%s} %s',
	           pqrun._label(queue), pqrun._label(concurrency_key), tokens), E'\n'
	           ORDER BY queue, concurrency_key)
	     FROM qc WHERE rate IS NOT NULL AND concurrency_key IS NOT NULL),
	  '# HELP pqrun_key_rate_limited Keys of the queue without a token in their bucket now (pqrun.set_key_rate_limit).',
	  '# TYPE pqrun_key_rate_limited gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_key_rate_limited{queue=%s} %s',
	           pqrun._label(queue), rate_limited_keys), E'\n' ORDER BY queue)
	     FROM qc WHERE rate_per_key IS NOT NULL),
	  '# HELP pqrun_enqueued_last_5min Jobs enqueued in the last five minutes.',
	  '# TYPE pqrun_enqueued_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_enqueued_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), enqueued_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs WHERE enqueued_last_5min IS NOT NULL),
	  '# HELP pqrun_picked_last_5min Jobs claimed in the last five minutes.',
	  '# TYPE pqrun_picked_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_picked_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), picked_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs WHERE picked_last_5min IS NOT NULL),
	  '# HELP pqrun_errors_last_5min Attempts that ended in an error in the last five minutes, retried or not.',
	  '# TYPE pqrun_errors_last_5min gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_errors_last_5min{queue=%s,job_type=%s} %s',
	           pqrun._label(queue), pqrun._label(job_type), errors_last_5min), E'\n' ORDER BY queue, job_type)
	     FROM qs WHERE errors_last_5min IS NOT NULL),
	  '# HELP pqrun_rescued_total RUNNING jobs maintenance put back since the database''s worker slot was taken: stale (their stale window passed) or orphaned (their holder''s session ended).',
	  '# TYPE pqrun_rescued_total counter',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_rescued_total{reason="%s"} %s', label, value), E'\n' ORDER BY label)
	     FROM sc WHERE metric = 'rescued_total'),
	  '# HELP pqrun_shared_memory_entries Entries taken in a fixed-size table of pqrun''s shared memory.',
	  '# TYPE pqrun_shared_memory_entries gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_shared_memory_entries{table="%s"} %s', label, value), E'\n' ORDER BY label)
	     FROM sc WHERE metric = 'shared_memory_entries'),
	  '# HELP pqrun_shared_memory_capacity Entries a fixed-size table of pqrun''s shared memory holds.',
	  '# TYPE pqrun_shared_memory_capacity gauge',
	  (SELECT pg_catalog.string_agg(pg_catalog.format('pqrun_shared_memory_capacity{table="%s"} %s', label, value), E'\n' ORDER BY label)
	     FROM sc WHERE metric = 'shared_memory_capacity')) || E'\n'
$$;

/* ---- Permissions -------------------------------------------------------- */

/* The API functions run as the extension's owner with a pinned search_path:
 * roles get EXECUTE on exactly the functions of their use and no access to
 * the tables behind them. */
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
	          WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pqrun'::regnamespace
	            AND p.prolang OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'c')
	            AND p.prokind OPERATOR(pg_catalog.=) 'f'
	LOOP
		EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', f);
	END LOOP;
END $$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pqrun FROM PUBLIC;
REVOKE ALL ON ALL PROCEDURES IN SCHEMA pqrun FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pqrun FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pqrun FROM PUBLIC;

/* A fresh lease token for each claimed row, called by pickup's claim (which
 * runs as the owner). Not SECURITY DEFINER: switching role and search_path on
 * every row would cost more than the token itself. */
CREATE FUNCTION pqrun._lease_token() RETURNS uuid
AS 'MODULE_PATHNAME', 'pqrun_lease_token' LANGUAGE c VOLATILE;
REVOKE ALL ON FUNCTION pqrun._lease_token() FROM PUBLIC;

/* When this backend started: with holder_pid it names the session holding a
 * running job, since process ids are reused (orphan rescue, docs/operations.md). */
CREATE FUNCTION pqrun._backend_started() RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_backend_started' LANGUAGE c STABLE PARALLEL SAFE;
REVOKE ALL ON FUNCTION pqrun._backend_started() FROM PUBLIC;

/* Every grant_* function refuses what names no role (NULL, 0::regrole)
 * with 22023, instead of building a broken GRANT. */
CREATE FUNCTION pqrun._require_role(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF role IS NULL OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) role) THEN
		RAISE EXCEPTION 'role must name an existing role' USING ERRCODE = 'invalid_parameter_value';
	END IF;
END $$;
REVOKE ALL ON FUNCTION pqrun._require_role(regrole) FROM PUBLIC;

/* What pqrun's roles may use, in one list (0.21.0): each relation
 * (SELECT), function and procedure (EXECUTE) of the API with the roles that
 * grant_producer, grant_worker, grant_monitor and grant_operator give it
 * to, and whether distribute() has Citus run a call of it on the node of
 * its queue. A function added to the API is granted and delegated by its
 * row here. */
CREATE FUNCTION pqrun._api(OUT object text, OUT kind "char", OUT roles text[], OUT delegated boolean)
RETURNS SETOF record LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$ VALUES
	('pqrun.jobs', 'r'::"char", '{producer,worker,monitor,operator}'::text[], false),
	/* await_jobs cannot be SECURITY DEFINER (it commits): it reads job_live
	 * and the flow controls as its caller. */
	('pqrun.job_live', 'r', '{worker}', false),
	('pqrun.queue_control', 'r', '{worker}', false),
	('pqrun.job_attempts', 'r', '{monitor,operator}', false),
	('pqrun.queue_stats', 'r', '{monitor,operator}', false),
	('pqrun.queue_controls', 'r', '{monitor,operator}', false),
	('pqrun.queue_overview', 'r', '{monitor,operator}', false),
	('pqrun.flow_controls', 'r', '{monitor,operator}', false),
	('pqrun.workers', 'r', '{monitor,operator}', false),
	('pqrun.health', 'r', '{monitor,operator}', false),
	('pqrun.periodic', 'r', '{monitor,operator}', false),
	('pqrun.enqueue(text, jsonb, int, timestamptz, int, int, text, text, bigint[], text, text, int)', 'f',
	 '{producer,worker}', true),
	('pqrun.enqueue_batch(jsonb)', 'f', '{producer,worker}', false),
	('pqrun.cancel(bigint, text, text)', 'f', '{producer,operator}', true),
	('pqrun.pickup(text, text[], text[], int, interval)', 'f', '{worker}', false),
	('pqrun.pickup_from(text, text, int, interval, text[])', 'f', '{worker}', true),
	('pqrun.mark_done(bigint, jsonb, uuid, text)', 'f', '{worker}', true),
	('pqrun.mark_done_batch(bigint[], uuid[], text)', 'f', '{worker}', true),
	('pqrun.mark_done_and_pickup(text, bigint[], uuid[], jsonb[], text[], text[], int)', 'f', '{worker}', false),
	('pqrun.mark_error(bigint, text, boolean, uuid, interval, text)', 'f', '{worker}', true),
	('pqrun.heartbeat(bigint, uuid, jsonb, interval, text)', 'f', '{worker}', true),
	('pqrun.release(bigint, uuid, text)', 'f', '{worker}', true),
	('pqrun.snooze(bigint, interval, uuid, text)', 'f', '{worker}', true),
	('pqrun.queue_node(text)', 'f', '{worker}', false),
	('pqrun.await_jobs(text[], text[], interval, boolean)', 'p', '{worker}', false),
	('pqrun.metrics()', 'f', '{monitor,operator}', false),
	('pqrun.job_dependents(bigint, int)', 'f', '{monitor,operator}', false),
	/* Functions in a view run with the privileges of whoever reads it. */
	('pqrun._queue_counters()', 'f', '{monitor,operator}', false),
	('pqrun._flow_counters()', 'f', '{monitor,operator}', false),
	('pqrun._key_buckets()', 'f', '{monitor,operator}', false),
	('pqrun._shared_counters()', 'f', '{monitor,operator}', false),
	('pqrun._label(text)', 'f', '{monitor,operator}', false),
	('pqrun.retry(bigint, text)', 'f', '{operator}', true),
	('pqrun.pause_queue(text)', 'f', '{operator}', true),
	('pqrun.resume_queue(text)', 'f', '{operator}', true),
	('pqrun.set_concurrency_limit(text, int, text)', 'f', '{operator}', true),
	('pqrun.set_rate_limit(text, double precision, int, text)', 'f', '{operator}', true),
	('pqrun.set_key_limit(text, int, text)', 'f', '{operator}', true),
	('pqrun.set_key_rate_limit(text, double precision, int, text)', 'f', '{operator}', true),
	/* The bulk actions run as their caller (they commit): the helpers they call. */
	('pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint)', 'p',
	 '{operator}', false),
	('pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint)', 'p',
	 '{operator}', false),
	('pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int)',
	 'f', '{operator}', false),
	('pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int)', 'f', '{operator}', false),
	('pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean)', 'f', '{}', true)
$$;
REVOKE ALL ON FUNCTION pqrun._api() FROM PUBLIC;

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

CREATE FUNCTION pqrun.grant_producer(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'producer');
END $$;

CREATE FUNCTION pqrun.grant_worker(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'worker');
END $$;

CREATE FUNCTION pqrun.grant_monitor(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'monitor');
END $$;

REVOKE ALL ON FUNCTION pqrun.grant_producer(regrole), pqrun.grant_worker(regrole), pqrun.grant_monitor(regrole) FROM PUBLIC;

/* ---- Acting on many jobs ------------------------------------------------ */

/* The next `n` jobs after id `after_id` that match a filter (NULL: any),
 * finished ones from pqrun.job_done or unfinished ones from job_live, in
 * id order: retry_jobs and cancel_jobs walk them batch by batch. */
CREATE FUNCTION pqrun._jobs_matching(
	finished boolean, queue text, job_type text, statuses pqrun.job_status[],
	after_time timestamptz, before_time timestamptz, error_contains text, payload_contains jsonb,
	after_id bigint, n int)
RETURNS TABLE (job_id bigint, job_queue text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF finished THEN
		RETURN QUERY
		SELECT d.id, d.queue FROM pqrun.job_done d
		 WHERE d.status = ANY (statuses) AND d.id > after_id
		   AND (_jobs_matching.queue IS NULL OR d.queue = _jobs_matching.queue)
		   AND (_jobs_matching.job_type IS NULL OR d.job_type = _jobs_matching.job_type)
		   AND (after_time IS NULL OR d.finished_at >= after_time)
		   AND (before_time IS NULL OR d.finished_at < before_time)
		   AND (error_contains IS NULL OR strpos(lower(d.last_error), lower(error_contains)) > 0)
		   AND (payload_contains IS NULL OR d.payload @> payload_contains)
		 ORDER BY d.id LIMIT n;
	ELSE
		RETURN QUERY
		SELECT l.id, l.queue FROM pqrun.job_live l
		 WHERE l.status = ANY (statuses) AND l.id > after_id
		   AND (_jobs_matching.queue IS NULL OR l.queue = _jobs_matching.queue)
		   AND (_jobs_matching.job_type IS NULL OR l.job_type = _jobs_matching.job_type)
		   AND (after_time IS NULL OR l.created_at >= after_time)
		   AND (before_time IS NULL OR l.created_at < before_time)
		   AND (error_contains IS NULL OR strpos(lower(l.last_error), lower(error_contains)) > 0)
		   AND (payload_contains IS NULL OR l.payload @> payload_contains)
		 ORDER BY l.id LIMIT n;
	END IF;
END $$;

/* The arguments every bulk action checks alike (22023). */
CREATE FUNCTION pqrun._check_bulk(statuses pqrun.job_status[], allowed pqrun.job_status[], batch_size int)
RETURNS void LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF statuses IS NULL OR cardinality(statuses) = 0 OR NOT statuses <@ allowed OR array_position(statuses, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'statuses must be among %', allowed USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF batch_size IS NULL OR batch_size < 1 OR batch_size > 10000 THEN
		RAISE EXCEPTION 'batch_size must be between 1 and 10000' USING ERRCODE = 'invalid_parameter_value';
	END IF;
END $$;

/* Bulk retry and cancel by filter, batch_size jobs per transaction: a
 * million-row action never holds one long transaction or its locks. They
 * commit, so they are procedures (not SECURITY DEFINER, which would forbid
 * COMMIT): they act as their caller, through pqrun.retry and pqrun.cancel,
 * and name every operator and function by its schema. */
CREATE PROCEDURE pqrun.retry_jobs(
	queue            text               DEFAULT NULL,
	job_type         text               DEFAULT NULL,
	statuses         pqrun.job_status[] DEFAULT '{FAILED,CANCELLED}',
	finished_after   timestamptz        DEFAULT NULL,
	finished_before  timestamptz        DEFAULT NULL,
	error_contains   text               DEFAULT NULL,
	payload_contains jsonb              DEFAULT NULL,
	batch_size       int                DEFAULT 1000,
	INOUT retried    bigint             DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	after_id bigint := -9223372036854775808;
	job record;
	last_id bigint;
BEGIN
	PERFORM pqrun._check_bulk(statuses, '{FAILED,CANCELLED}', batch_size);
	retried := 0;
	LOOP
		last_id := NULL;
		FOR job IN SELECT m.job_id AS id, m.job_queue AS queue FROM pqrun._jobs_matching(true, queue, job_type, statuses,
		               finished_after, finished_before, error_contains, payload_contains, after_id, batch_size) m LOOP
			BEGIN
				IF pqrun.retry(job.id, job.queue) THEN
					retried := retried OPERATOR(pg_catalog.+) 1;
				END IF;
			EXCEPTION WHEN unique_violation THEN
				/* Another unfinished job holds its dedupe_key: it stays. */
				NULL;
			END;
			last_id := job.id;
		END LOOP;
		EXIT WHEN last_id IS NULL;
		after_id := last_id;
		COMMIT;
	END LOOP;
END $$;

CREATE PROCEDURE pqrun.cancel_jobs(
	queue            text               DEFAULT NULL,
	job_type         text               DEFAULT NULL,
	statuses         pqrun.job_status[] DEFAULT '{READY,BLOCKED}',
	created_after    timestamptz        DEFAULT NULL,
	created_before   timestamptz        DEFAULT NULL,
	error_contains   text               DEFAULT NULL,
	payload_contains jsonb              DEFAULT NULL,
	reason           text               DEFAULT NULL,
	batch_size       int                DEFAULT 1000,
	INOUT cancelled  bigint             DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
	after_id bigint := -9223372036854775808;
	job record;
	last_id bigint;
BEGIN
	PERFORM pqrun._check_bulk(statuses, '{READY,BLOCKED,RUNNING}', batch_size);
	cancelled := 0;
	LOOP
		last_id := NULL;
		FOR job IN SELECT m.job_id AS id, m.job_queue AS queue FROM pqrun._jobs_matching(false, queue, job_type, statuses,
		               created_after, created_before, error_contains, payload_contains, after_id, batch_size) m LOOP
			IF pqrun.cancel(job.id, reason, job.queue) THEN
				cancelled := cancelled OPERATOR(pg_catalog.+) 1;
			END IF;
			last_id := job.id;
		END LOOP;
		EXIT WHEN last_id IS NULL;
		after_id := last_id;
		COMMIT;
	END LOOP;
END $$;

REVOKE ALL ON FUNCTION pqrun._jobs_matching(boolean, text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, bigint, int),
	pqrun._check_bulk(pqrun.job_status[], pqrun.job_status[], int) FROM PUBLIC;
REVOKE ALL ON PROCEDURE pqrun.retry_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, int, bigint),
	pqrun.cancel_jobs(text, text, pqrun.job_status[], timestamptz, timestamptz, text, jsonb, text, int, bigint) FROM PUBLIC;

/* An operator (a dashboard, an on-call engineer) sees what a monitor sees
 * and may retry, cancel, pause and resume queues and set their limits; it
 * enqueues and claims nothing. */
CREATE FUNCTION pqrun.grant_operator(role regrole)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM pqrun._grant(role, 'operator');
END $$;
REVOKE ALL ON FUNCTION pqrun.grant_operator(regrole) FROM PUBLIC;

/* ---- Background workers ------------------------------------------------- */

CREATE FUNCTION pqrun._register_database()
RETURNS void
AS 'MODULE_PATHNAME', 'pqrun_register_database' LANGUAGE c VOLATILE;
REVOKE ALL ON FUNCTION pqrun._register_database() FROM PUBLIC;

/* Wake the launcher so this database gets its worker within a second. */
SELECT pqrun._register_database();

/* job_done's partitions by range and their bounds (MINVALUE and MAXVALUE as
 * -infinity and infinity), as pg_get_expr shows them in UTC. */
CREATE FUNCTION pqrun._history_partitions()
RETURNS TABLE (part regclass, lo timestamptz, hi timestamptz)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET datestyle = 'ISO, YMD'
AS $$
	SELECT i.inhrelid::regclass,
	       CASE WHEN m[1] = 'MINVALUE' THEN '-infinity' ELSE btrim(m[1], '''') END::timestamptz,
	       CASE WHEN m[2] = 'MAXVALUE' THEN 'infinity' ELSE btrim(m[2], '''') END::timestamptz
	  FROM pg_inherits i, pg_class c,
	       regexp_match(pg_get_expr(c.relpartbound, c.oid), '^FOR VALUES FROM \((.*)\) TO \((.*)\)$') AS m
	 WHERE i.inhparent = 'pqrun.job_done'::regclass AND c.oid = i.inhrelid AND m IS NOT NULL
	 ORDER BY 2
$$;
REVOKE ALL ON FUNCTION pqrun._history_partitions() FROM PUBLIC;

/* History partitions (docs/operations.md, "History and retention"): the part of a maintenance round
 * that changes job_done's partitions. Makes those that the next `ahead`
 * intervals of `step` after the one holding `round_at` need and no partition
 * covers yet; and drops those that end at or before `drop_before` (NULL:
 * none), keeping in job_done_default their FAILED jobs that finished at or
 * after `keep_failed_from` (NULL: none). Partitions start at multiples of
 * `step` since 1970 (UTC) and are named after their start; none is made
 * while job_done has none and there is no job at all. A partition that
 * cannot be made or dropped now (a name taken) is left for a later round,
 * and so is the rest of the round after a lock not granted.
 *
 * Rows never move between partitions (0.17.0): what job_done_default holds
 * of a new partition's time (jobs that finished while no partition covered
 * it) stays there, and the partition starts just past the last of them. A
 * move took the rows out of sight of every snapshot taken before it: a
 * query planned after the ATTACH skips the default partition for that time,
 * and their copies in the new partition are newer than the snapshot.
 *
 * Locks (0.13.0): finishes wait for what the round holds of job_done, so
 * the round never waits for a lock while it holds one of job_done: a
 * session that read job_done and then finishes would wait for the round
 * while the round waited for it, and once its wait reached
 * deadlock_timeout, its finish failed with 40P01. Each partition is made
 * or dropped in a block of its own whose lock of job_done is waited for at
 * most lock_timeout (100 ms), and only while the round holds nothing of
 * job_done yet; every other lock is taken with NOWAIT, and a block that
 * fails gives back its locks. */
CREATE FUNCTION pqrun._history_round(round_at timestamptz, step interval, ahead int,
                                     drop_before timestamptz, keep_failed_from timestamptz)
RETURNS TABLE (queue text, job_type text, status text, jobs bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET lock_timeout = '100ms'
AS $$
DECLARE
	seconds float8 := extract(epoch FROM step);
	cols text;
	s timestamptz;
	e timestamptz;
	covered timestamptz;
	whole timestamptz;
	last timestamptz;
	locked boolean;
	made text;
	dropped record;
	counted jsonb;
	waited boolean := false;
	/* The round holds a lock of job_done: from then on it never waits. */
	held boolean := false;
BEGIN
	SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO cols
	  FROM pg_attribute WHERE attrelid = 'pqrun.job_done'::regclass AND attnum > 0 AND NOT attisdropped;
	/* None before the first job: a restore makes job_done's partitions (as
	 * pg_dump saw them) after CREATE EXTENSION and before it copies any
	 * job, and ours would take their names and times. Read under a lock
	 * that holds off another round's ATTACH, given back with the block:
	 * its subtransaction is rolled back on purpose. */
	IF NOT EXISTS (SELECT FROM pqrun._history_partitions()) THEN
		BEGIN
			LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE;
			IF NOT EXISTS (SELECT FROM pqrun.job_done_default) AND NOT EXISTS (SELECT FROM pqrun.job_live) THEN
				ahead := -1;
			END IF;
			RAISE EXCEPTION USING ERRCODE = 'PQ000';
		EXCEPTION
			WHEN lock_not_available THEN RETURN;
			WHEN SQLSTATE 'PQ000' THEN NULL;
		END;
	END IF;

	FOR k IN 0..ahead LOOP
		EXIT WHEN waited;
		BEGIN
			locked := false;
			LOOP
				s := to_timestamp(floor(extract(epoch FROM round_at) / seconds) * seconds) + k * step;
				e := s + step;
				/* Past the partitions that cover s, short of the next one. */
				LOOP
					covered := (SELECT max(p.hi) FROM pqrun._history_partitions() AS p WHERE p.lo <= s AND p.hi > s);
					EXIT WHEN covered IS NULL;
					s := covered;
				END LOOP;
				whole := e;
				e := LEAST(e, (SELECT min(p.lo) FROM pqrun._history_partitions() AS p WHERE p.lo > s));
				/* Past what job_done_default holds of it; none in a gap
				 * before a partition, which only such rows leave. */
				last := (SELECT max(d.finished_at) FROM pqrun.job_done_default AS d WHERE d.finished_at >= s AND d.finished_at < e);
				IF last IS NOT NULL THEN
					s := CASE WHEN e < whole THEN e ELSE last + interval '1 microsecond' END;
				END IF;
				EXIT WHEN s >= e OR locked;
				/* Then again under a lock that holds off other rounds (which
				 * may have made it meanwhile) and every finish: one routed
				 * before the ATTACH to the default partition would meet its
				 * new constraint after it (23514). Held until the round
				 * commits. */
				EXECUTE format('LOCK TABLE pqrun.job_done IN SHARE ROW EXCLUSIVE MODE%s',
				               CASE WHEN held THEN ' NOWAIT' ELSE '' END);
				locked := true;
			END LOOP;
			CONTINUE WHEN s >= e;
			/* A partition that begins by now takes finishes as soon as it
			 * is attached: a query planned meanwhile without it, whose
			 * snapshot is taken after its plan (SPI's, in pqrun's
			 * functions), would miss the jobs finished there (0.21.0:
			 * "job does not exist" for a job just finished). Attached
			 * under ACCESS EXCLUSIVE, it is in every plan made after the
			 * round commits; one made ahead of its time is empty until
			 * long after. */
			IF s <= round_at THEN
				LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE NOWAIT;
			END IF;
			/* ATTACH also locks the default partition, whose constraint
			 * changes. */
			LOCK TABLE pqrun.job_done_default IN ACCESS EXCLUSIVE MODE NOWAIT;
			made := 'job_done_' || to_char(s, 'YYYYMMDD_HH24MISS')
			        || CASE WHEN date_trunc('second', s) <> s THEN to_char(s, '_US') ELSE '' END;
			EXECUTE format('CREATE TABLE pqrun.%I (LIKE pqrun.job_done INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (id)', made);
			EXECUTE format('CREATE INDEX ON pqrun.%I (finished_at) WHERE status = ''FAILED''', made);
			EXECUTE format('ALTER TABLE pqrun.job_done ATTACH PARTITION pqrun.%I FOR VALUES FROM (%L) TO (%L)', made, s, e);
			held := true;
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition pqrun.% of pqrun.job_done not made: %', made, SQLERRM;
		END;
	END LOOP;

	FOR dropped IN SELECT p.part FROM pqrun._history_partitions() AS p WHERE p.hi <= drop_before LOOP
		EXIT WHEN waited;
		BEGIN
			/* No purge or retry may change what is counted before it goes
			 * (finishes do not write to a partition that ended). */
			EXECUTE format('LOCK TABLE %s IN SHARE MODE%s', dropped.part, CASE WHEN held THEN ' NOWAIT' ELSE '' END);
			EXECUTE format('SELECT jsonb_agg(g) FROM (SELECT queue, job_type, status::text AS status, count(*) AS jobs'
			               '  FROM %s WHERE status <> ''FAILED'' OR $1 IS NULL OR finished_at < $1 GROUP BY 1, 2, 3) AS g',
			               dropped.part) INTO counted USING keep_failed_from;
			EXECUTE format('DELETE FROM pqrun.attempt_log a USING %s d WHERE a.job_id = d.id'
			               '   AND (d.status <> ''FAILED'' OR $1 IS NULL OR d.finished_at < $1)', dropped.part) USING keep_failed_from;
			/* The one moment finishes wait: from here to the round's commit,
			 * with the FAILED jobs kept being copied. DETACH also locks the
			 * partition and the default partition. */
			EXECUTE format('LOCK TABLE pqrun.job_done IN ACCESS EXCLUSIVE MODE%s', CASE WHEN held THEN ' NOWAIT' ELSE '' END);
			EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE NOWAIT', dropped.part);
			LOCK TABLE pqrun.job_done_default IN ACCESS EXCLUSIVE MODE NOWAIT;
			EXECUTE format('ALTER TABLE pqrun.job_done DETACH PARTITION %s', dropped.part);
			IF keep_failed_from IS NOT NULL THEN
				EXECUTE format('INSERT INTO pqrun.job_done_default (%s) SELECT %s FROM %s'
				               ' WHERE status = ''FAILED'' AND finished_at >= $1', cols, cols, dropped.part) USING keep_failed_from;
			END IF;
			EXECUTE format('DROP TABLE %s', dropped.part);
			held := true;
			RETURN QUERY SELECT g.queue, g.job_type, g.status, g.jobs
			               FROM jsonb_to_recordset(coalesce(counted, '[]')) AS g(queue text, job_type text, status text, jobs bigint);
		EXCEPTION
			WHEN lock_not_available THEN waited := true;
			/* Another round dropped it first. */
			WHEN undefined_table OR invalid_table_definition THEN NULL;
			WHEN OTHERS THEN RAISE WARNING 'pqrun: partition % of pqrun.job_done not dropped: %', dropped.part, SQLERRM;
		END;
	END LOOP;
END $$;
REVOKE ALL ON FUNCTION pqrun._history_round(timestamptz, interval, int, timestamptz, timestamptz) FROM PUBLIC;

/* ---- Periodic schedules ---- */

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

CREATE FUNCTION pqrun.unschedule(name text, key text DEFAULT '')
RETURNS boolean
AS 'MODULE_PATHNAME', 'pqrun_unschedule' LANGUAGE c VOLATILE;

/* STABLE, not IMMUTABLE: the answer depends on pqrun.cron_timezone. */
CREATE FUNCTION pqrun.cron_next(expr text, after timestamptz DEFAULT pg_catalog.now())
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_cron_next' LANGUAGE c STABLE STRICT PARALLEL SAFE;

/* Internal: one firing step of the maintenance round (what
 * run_maintenance() and the workers do), and the run_every slot arithmetic
 * it uses: the first due + k * run_every (k >= 1) after `after`. */
CREATE FUNCTION pqrun._fire_due_schedules()
RETURNS bigint
AS 'MODULE_PATHNAME', 'pqrun_fire_due_schedules' LANGUAGE c VOLATILE;

CREATE FUNCTION pqrun._run_every_next(run_every interval, due timestamptz, after timestamptz)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'pqrun_run_every_next' LANGUAGE c STABLE STRICT PARALLEL SAFE;

/* As the other API functions (see "Permissions"): the ones that touch
 * pqrun.periodic run as the extension's owner with a pinned search_path, and
 * PUBLIC gets nothing. */
ALTER FUNCTION pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean)
	SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION pqrun.unschedule(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION pqrun._fire_due_schedules() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION pqrun.schedule(text, text, text, interval, jsonb, int, text, text, boolean),
	pqrun.unschedule(text, text), pqrun.cron_next(text, timestamptz), pqrun._fire_due_schedules(),
	pqrun._run_every_next(interval, timestamptz, timestamptz) FROM PUBLIC;

/* ---- Citus ---- */

/* distribute spreads the queues over the nodes of a Citus cluster (docs/citus.md): job_live and job_done distributed by queue,
 * co-located, in shard_count shards; enqueue, schedule, the per-queue
 * controls, pickup_from and the job-id calls delegated by their queue to the
 * node that holds it. Called on the coordinator, by a superuser; a second
 * call only delegates the calls again. Citus's unique constraints must include the
 * distribution column, so the primary key becomes (id, queue) and dedupe
 * keys are unique per queue. */
CREATE FUNCTION pqrun.distribute(shard_count int DEFAULT 32)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	holding text;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RAISE EXCEPTION 'Citus is not installed in this database' USING ERRCODE = '0A000';
	END IF;
	IF shard_count IS NULL OR shard_count OPERATOR(pg_catalog.<) 1 OR shard_count OPERATOR(pg_catalog.>) 64000 THEN
		RAISE EXCEPTION 'shard_count must be between 1 and 64000' USING ERRCODE = '22023';
	END IF;
	IF NOT pg_catalog.citus_is_coordinator() THEN
		RAISE EXCEPTION 'pqrun.distribute() runs on the coordinator' USING ERRCODE = '0A000';
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
	            WHERE logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass) THEN
		RAISE NOTICE 'pqrun''s tables are distributed already';
	ELSE
		/* A worker's own tables become the shells of the distributed ones:
		 * their jobs would be hidden. */
		SELECT pg_catalog.string_agg(r.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) r.nodeport, ', ')
		  INTO holding
		  FROM pg_catalog.run_command_on_workers(
		           'SELECT (SELECT pg_catalog.count(*) FROM (SELECT FROM pqrun.job_live LIMIT 1) l)'
		           ' OPERATOR(pg_catalog.+) (SELECT pg_catalog.count(*) FROM (SELECT FROM pqrun.job_done LIMIT 1) d)') r
		 WHERE NOT r.success OR r.result OPERATOR(pg_catalog.<>) '0';
		IF holding IS NOT NULL THEN
			RAISE EXCEPTION 'worker nodes hold jobs of their own: %', holding USING ERRCODE = '55000',
				HINT = 'Finish or purge them first: distributed, pqrun''s tables on a worker are shells whose rows are not read.';
		END IF;
		/* Schedules and queue controls are kept on the node of their queue;
		 * the coordinator's own would apply nowhere. */
		IF EXISTS (SELECT FROM pqrun.periodic) OR EXISTS (SELECT FROM pqrun.queue_control) THEN
			RAISE EXCEPTION 'the coordinator has schedules or queue controls' USING ERRCODE = '55000',
				HINT = 'Remove them, and make them again through the coordinator once the tables are distributed.';
		END IF;
		/* Ids unique across the cluster: Citus leaves an extension's sequence
		 * alone on the workers, so each node's counts from its group id << 48,
		 * as Citus's own sequences on workers do. */
		PERFORM pg_catalog.run_command_on_all_nodes(
			'SELECT pg_catalog.setval(''pqrun.job_id_seq'', GREATEST((SELECT last_value FROM pqrun.job_id_seq),'
			' ((SELECT groupid FROM pg_catalog.pg_dist_local_group)::bigint OPERATOR(pg_catalog.<<) 48)'
			' OPERATOR(pg_catalog.+) 1))');
		ALTER TABLE pqrun.job_live DROP CONSTRAINT job_live_pkey, ADD CONSTRAINT job_live_pkey PRIMARY KEY (id, queue);
		DROP INDEX pqrun.job_live_dedupe;
		CREATE UNIQUE INDEX job_live_dedupe ON pqrun.job_live (dedupe_key, queue) WHERE dedupe_key IS NOT NULL;
		PERFORM pg_catalog.create_distributed_table('pqrun.job_live', 'queue', shard_count => shard_count);
		PERFORM pg_catalog.create_distributed_table('pqrun.job_done', 'queue', colocate_with => 'pqrun.job_live');
	END IF;
	/* The lanes of filtered pickups (0.16.0) of an install distributed
	 * before: its update left them to this call, since an index made in an
	 * extension's script does not reach the shards. */
	IF pg_catalog.to_regclass('pqrun.job_live_pick_type') IS NULL THEN
		CREATE INDEX job_live_pick_type ON pqrun.job_live (job_type, (-(priority::bigint)), id)
			WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
	END IF;
	IF pg_catalog.to_regclass('pqrun.job_live_pick_queue') IS NULL THEN
		CREATE INDEX job_live_pick_queue ON pqrun.job_live (queue, job_type, (-(priority::bigint)), id)
			WHERE status = 'READY' AND NOT delayed AND concurrency_key IS NULL;
	END IF;
	/* The delegated calls, again on a second call: ALTER EXTENSION pqrun
	 * UPDATE may have made some of them anew. */
	PERFORM pg_catalog.create_distributed_function(a.object::pg_catalog.regprocedure, 'queue',
	                                               colocate_with => 'pqrun.job_live')
	   FROM pqrun._api() a WHERE a.delegated;
END $$;

/* queue_node answers the node that holds the queue's jobs once pqrun's
 * tables are distributed: where its workers connect. */
CREATE FUNCTION pqrun.queue_node(queue text, OUT host text, OUT port int)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF queue IS NULL THEN
		RAISE EXCEPTION 'queue must not be NULL' USING ERRCODE = '22023';
	END IF;
	/* Two statements: pg_dist_partition exists only with Citus. */
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
		RAISE EXCEPTION 'pqrun''s tables are not distributed by Citus' USING ERRCODE = '0A000';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
	                WHERE logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass) THEN
		RAISE EXCEPTION 'pqrun''s tables are not distributed by Citus' USING ERRCODE = '0A000';
	END IF;
	SELECT n.nodename, n.nodeport INTO host, port
	  FROM pg_catalog.pg_dist_placement p
	  JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid
	 WHERE p.shardid OPERATOR(pg_catalog.=) pg_catalog.get_shard_id_for_distribution_column('pqrun.job_live', queue)
	   AND n.isactive AND n.noderole OPERATOR(pg_catalog.=) 'primary';
END $$;
REVOKE ALL ON FUNCTION pqrun.queue_node(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION pqrun.distribute(int) FROM PUBLIC;
