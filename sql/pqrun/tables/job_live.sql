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
