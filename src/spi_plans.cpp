/* src/spi_plans.cpp — SQL text of every statement and its kept plan.
 *
 * All text is schema-qualified and takes values only as parameters. Plans
 * are prepared on first use in each backend and kept for its lifetime; the
 * plan cache re-plans them after DDL (including DROP/CREATE EXTENSION).
 */
#include "spi_plans.hpp"

#include "job_row.hpp"

namespace pqrun::spi {

namespace {

constexpr int kMaxArgs = 12;

struct StmtDef {
	Stmt stmt;
	const char *name;
	const char *sql;
	int nargs;
	Oid argtypes[kMaxArgs];
};

/* Columns of pqrun.jobs, in the view's order (job_row.hpp), from a job_live
 * row a claim updated, and from one a locking pick left as it is. */
#define LIVE_AS_JOB                                                                                                    \
	"id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds, "             \
	"locked_at, locked_by, lease_token, dedupe_key, fifo_key, depends_on, last_error, "                                \
	"NULL::timestamptz, NULL::int, NULL::jsonb, created_at, updated_at "
#define LOCKED_AS_JOB                                                                                                  \
	"id, queue, job_type, payload, 'RUNNING'::pqrun.job_status, priority, attempts + 1, max_attempts,"                 \
	"   run_after, timeout_seconds, $7::timestamptz, $1::text, " PQRUN_LEASE_TOKEN ", dedupe_key, fifo_key,"           \
	"   depends_on, last_error, NULL::timestamptz, NULL::int, NULL::jsonb, created_at, $7::timestamptz"
static_assert(job_row::SelectListIs(LIVE_AS_JOB, false, ""), "LIVE_AS_JOB must list job_row::kColumns");
static_assert(job_row::SelectListIs(LOCKED_AS_JOB, true, ""), "LOCKED_AS_JOB must list job_row::kColumns");

/* Claim up to $2 runnable jobs for worker $1 at time $7, optionally filtered
 * by job types $3 and queues $4, starting at pickup key ($5, $6) =
 * (-priority, id). The partial index job_live_pick yields rows already in
 * priority/id order, so the claim touches only the rows it returns plus the
 * ones other pickers hold. The claimed ids go through an array rather than a
 * join so that the (generic) plan updates them by primary key. */
/* Claim the rows `candidates` selects for worker $1 at time `at`. */
#define LEASE_TOKEN PQRUN_LEASE_TOKEN
/* The session holding a running job: its process id and its start (0.5.0;
 * see AsInstalled for installs that predate it). */
#define SET_HOLDER_STARTED "holder_started = pqrun._backend_started(), "
#define CLEAR_HOLDER_STARTED "holder_started = NULL, "
#define SELECT_HOLDER_STARTED "holder_started AS started"
#define SAME_HOLDER_STARTED " AND holder_started IS NOT DISTINCT FROM $3"
#define CLAIM(candidates, at)                                                                                          \
	"WITH claimed AS ("                                                                                                \
	"  UPDATE pqrun.job_live j"                                                                                        \
	"     SET status = 'RUNNING', delayed = false, attempts = j.attempts + 1,"                                         \
	"         locked_at = " at ", locked_by = $1,"                                                                     \
	"         lease_token = " LEASE_TOKEN ", heartbeat_at = NULL,"                                                     \
	"         holder_pid = pg_catalog.pg_backend_pid(), " SET_HOLDER_STARTED "updated_at = " at                        \
	"   WHERE j.id = ANY (ARRAY(" candidates "))"                                                                      \
	"  RETURNING j.*)"                                                                                                 \
	" SELECT " LIVE_AS_JOB " FROM claimed ORDER BY priority DESC, id"

static_assert(job_row::ClaimSets(CLAIM("", "$7"), " WHERE"), "CLAIM must set what job_row::kColumns says");

#define PICK(filter)                                                                                                   \
	CLAIM("SELECT id FROM pqrun.job_live"                                                                              \
	      " WHERE status = 'READY' AND NOT delayed AND ((-(priority::bigint)), id) >= ($5, $6) " filter                \
	      " ORDER BY (-(priority::bigint)), id"                                                                        \
	      " LIMIT $2 FOR UPDATE SKIP LOCKED",                                                                          \
	      "$7")

/* Arguments of PICK and LOCK_PICK: worker, batch size, job types, queues,
 * the pickup hint's key, and the claim time. */
// clang-format off
#define PICK_ARGS 7, {TEXTOID, INT4OID, TEXTARRAYOID, TEXTARRAYOID, INT8OID, INT8OID, TIMESTAMPTZOID}
// clang-format on

#define LOCK_PICK(filter)                                                                                              \
	"SELECT " LOCKED_AS_JOB ", ctid"                                                                                   \
	" FROM pqrun.job_live"                                                                                             \
	" WHERE status = 'READY' AND NOT delayed AND ((-(priority::bigint)), id) >= ($5, $6) " filter                      \
	" ORDER BY (-(priority::bigint)), id"                                                                              \
	" LIMIT $2 FOR UPDATE SKIP LOCKED"

/* Move the job_live rows in CTE `gone` to job_done as status $3 with outcome
 * $4 (kept only if the job was running), error $5 (NULL keeps the last one)
 * and result $6; answer what the caller must follow up on. */
#define FINISH_COLUMNS                                                                                                 \
	"id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds, locked_at,"   \
	" locked_by, lease_token, dedupe_key, fifo_key, depends_on, last_error, finished_at, duration_ms, result,"         \
	" created_at, updated_at, outcome"
#define FINISH_VALUES                                                                                                  \
	"id, queue, job_type, payload, $3::pqrun.job_status, priority, attempts, max_attempts, run_after,"                 \
	" timeout_seconds, locked_at, locked_by, lease_token, dedupe_key, fifo_key, depends_on,"                           \
	" COALESCE($5, last_error), pg_catalog.now(), " PQRUN_DURATION_MS ", $6, created_at, pg_catalog.now(),"            \
	" CASE WHEN status = 'RUNNING' THEN $4 END"
static_assert(job_row::FinishIs(FINISH_COLUMNS, FINISH_VALUES), "the finish must fill job_row::kColumns' job_done");
#define FINISH_FROM_GONE                                                                                               \
	", moved AS (INSERT INTO pqrun.job_done (" FINISH_COLUMNS ") SELECT " FINISH_VALUES " FROM gone)"                  \
	" SELECT has_dependents, fifo_key, queue, job_type, status::text, locked_at, id FROM gone"

#define WRITE_DEFERRED_CLAIMS                                                                                          \
	"UPDATE pqrun.job_live j"                                                                                          \
	"   SET status = 'RUNNING', delayed = false, attempts = j.attempts + 1, locked_at = $3, locked_by = $4,"           \
	"       lease_token = c.token, heartbeat_at = NULL, holder_pid = pg_catalog.pg_backend_pid(),"                     \
	"       " SET_HOLDER_STARTED "updated_at = $3"                                                                     \
	"  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS c(id, token)"                                  \
	" WHERE j.id = c.id AND j.id = ANY ($1) AND j.status = 'READY'"
static_assert(job_row::ClaimSets(WRITE_DEFERRED_CLAIMS, " FROM"), "a written claim must set what job_row says");

/* Inserts into job_live. A job with a dedupe key that an unfinished job
 * holds answers that job (whose xmax is then set); without any dedupe key
 * nothing can conflict, and the keyless form skips the speculative insertion
 * (a lock and a confirmation record per row). Keyless runs of enqueue_batch
 * are inserted below the executor (direct_enqueue.hpp); the run statement
 * serves the others, and keyless runs only when that path declines. */
#define INSERT_LIVE                                                                                                    \
	"INSERT INTO pqrun.job_live AS j (status, delayed, priority, max_attempts, timeout_seconds, run_after,"            \
	"   created_at, updated_at, queue, job_type, dedupe_key, fifo_key, depends_on, payload)"                           \
	" VALUES ($1::pqrun.job_status, $2, $3, $4, $5, $6, pg_catalog.now(), pg_catalog.now(),"                           \
	"   $7, $8, $9, $10, $11, $12)"
static_assert(job_row::EnqueueListIs(INSERT_LIVE), "INSERT_LIVE must list job_row::kColumns' enqueued columns");
#define INSERT_LIVE_RETURNING " RETURNING j.id, j.xmax::text = '0', j.priority, j.status::text"
#define INSERT_LIVE_ARGS                                                                                               \
	12,                                                                                                                \
	{                                                                                                                  \
		TEXTOID, BOOLOID, INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8ARRAYOID, \
		    JSONBOID                                                                                                   \
	}
#define INSERT_LIVE_RUN                                                                                                \
	"INSERT INTO pqrun.job_live AS j (status, delayed, priority, max_attempts, timeout_seconds, run_after,"            \
	"   created_at, updated_at, queue, job_type, dedupe_key, payload)"                                                 \
	" SELECT 'READY', e.run_after > pg_catalog.now(), e.priority, e.max_attempts, e.timeout_seconds, e.run_after,"     \
	"   pg_catalog.now(), pg_catalog.now(), e.queue, e.job_type, e.dedupe_key, e.payload"                              \
	" FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4),"     \
	"   pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8)) WITH ORDINALITY"   \
	"   AS e(priority, max_attempts, timeout_seconds, run_after, queue, job_type, dedupe_key, payload, n)"             \
	" ORDER BY e.n"
#define INSERT_LIVE_RUN_RETURNING                                                                                      \
	" RETURNING j.id, j.xmax::text = '0', j.priority, j.status::text, j.queue, j.job_type, j.delayed, j.run_after"
#define INSERT_LIVE_RUN_ARGS                                                                                           \
	8,                                                                                                                 \
	{                                                                                                                  \
		INT4ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID,       \
		    JSONBARRAYOID                                                                                              \
	}
#define ON_DEDUPE_KEY                                                                                                  \
	" ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO UPDATE SET updated_at = EXCLUDED.updated_at"

const StmtDef kStmts[] = {
    {Stmt::kInsertLive, "insert live", INSERT_LIVE ON_DEDUPE_KEY INSERT_LIVE_RETURNING, INSERT_LIVE_ARGS},
    {Stmt::kInsertLiveKeyless, "insert live keyless", INSERT_LIVE INSERT_LIVE_RETURNING, INSERT_LIVE_ARGS},
    /* enqueue_batch's plain elements, one row per array position, inserted
	 * (and given ids) in element order. */
    {Stmt::kInsertLiveRun, "insert live run", INSERT_LIVE_RUN ON_DEDUPE_KEY INSERT_LIVE_RUN_RETURNING,
     INSERT_LIVE_RUN_ARGS},
    {Stmt::kInsertCancelled,
     "insert cancelled",
     "INSERT INTO pqrun.job_done (id, status, priority, attempts, max_attempts, timeout_seconds, run_after,"
     "   finished_at, created_at, updated_at, queue, job_type, dedupe_key, fifo_key, depends_on, last_error, payload)"
     " VALUES (pg_catalog.nextval('pqrun.job_id_seq'), 'CANCELLED', $1, 0, $2, $3, $4,"
     "   pg_catalog.now(), pg_catalog.now(), pg_catalog.now(), $5, $6, $7, $8, $9, $10, $11)"
     " RETURNING id",
     11,
     {INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8ARRAYOID, TEXTOID, JSONBOID}},
    /* Locks the unfinished dependencies so none can finish while the dependent
	 * is being written, and flags them so finishing them looks for dependents. */
    {Stmt::kLockLiveDeps,
     "lock live deps",
     "UPDATE pqrun.job_live SET has_dependents = true WHERE id = ANY ($1) RETURNING id, priority, status::text",
     1,
     {INT8ARRAYOID}},
    {Stmt::kFinishedDeps,
     "finished deps",
     "SELECT id, status::text FROM pqrun.job_done WHERE id = ANY ($1)",
     1,
     {INT8ARRAYOID}},
    {Stmt::kInsertEdges,
     "insert edges",
     "INSERT INTO pqrun.job_dep (job_id, dep_id) SELECT $1, d FROM pg_catalog.unnest($2) AS d"
     " ON CONFLICT DO NOTHING",
     2,
     {INT8OID, INT8ARRAYOID}},
    {Stmt::kFifoLock,
     "fifo lock",
     "SELECT pg_catalog.pg_advisory_xact_lock(1886745198, pg_catalog.hashtext($1))",
     1,
     {TEXTOID}},
    {Stmt::kFifoBusy, "fifo busy", "SELECT 1 FROM pqrun.job_live WHERE fifo_key = $1 LIMIT 1", 1, {TEXTOID}},
    {Stmt::kPromoteDue,
     "promote due",
     "UPDATE pqrun.job_live j SET delayed = false"
     " WHERE j.id = ANY (ARRAY(SELECT id FROM pqrun.job_live WHERE delayed AND run_after <= $1"
     "   AND ($2::text[] IS NULL OR job_type = ANY ($2)) AND ($3::text[] IS NULL OR queue = ANY ($3))"
     "   ORDER BY run_after LIMIT $4 FOR UPDATE SKIP LOCKED))"
     " RETURNING j.queue, j.job_type, j.priority, j.id",
     4,
     {TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID, INT4OID}},
    {Stmt::kReadyExists,
     "ready exists",
     "SELECT EXISTS (SELECT 1 FROM pqrun.job_live WHERE status = 'READY' AND (NOT delayed OR run_after <= $3)"
     "   AND ($1::text[] IS NULL OR job_type = ANY ($1)) AND ($2::text[] IS NULL OR queue = ANY ($2)))",
     3,
     {TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID}},
    {Stmt::kNextDelayed, "next delayed", "SELECT pg_catalog.min(run_after) FROM pqrun.job_live WHERE delayed", 0, {}},
    {Stmt::kPick, "pick", PICK(""), PICK_ARGS},
    {Stmt::kPickTypes, "pick by type", PICK("AND job_type = ANY ($3)"), PICK_ARGS},
    {Stmt::kPickQueues, "pick by queue", PICK("AND queue = ANY ($4)"), PICK_ARGS},
    {Stmt::kPickTypesQueues, "pick by type and queue", PICK("AND job_type = ANY ($3) AND queue = ANY ($4)"), PICK_ARGS},
    /* Delayed jobs that fell due and no maintenance round has promoted yet
	 * ($5: the clock), claimed directly when no promoted job is left. */
    {Stmt::kPickDue,
     "pick due",
     CLAIM("SELECT id FROM pqrun.job_live"
           " WHERE delayed AND run_after <= $5"
           "   AND ($3::text[] IS NULL OR job_type = ANY ($3)) AND ($4::text[] IS NULL OR queue = ANY ($4))"
           " ORDER BY run_after LIMIT $2 FOR UPDATE SKIP LOCKED",
           "$5"),
     5,
     {TEXTOID, INT4OID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID}},
    /* A batch pickup whose claims are deferred (deferred_claims.hpp): the
	 * same rows as PICK, locked but not written, as pqrun.jobs rows the
	 * claim will make of them, followed by where each row is. Run when
	 * direct_pick.hpp declines, which makes the same rows. */
    {Stmt::kLockPick, "lock pick", LOCK_PICK(""), PICK_ARGS},
    {Stmt::kLockPickTypes, "lock pick by type", LOCK_PICK("AND job_type = ANY ($3)"), PICK_ARGS},
    {Stmt::kLockPickQueues, "lock pick by queue", LOCK_PICK("AND queue = ANY ($4)"), PICK_ARGS},
    {Stmt::kLockPickTypesQueues, "lock pick by type and queue",
     LOCK_PICK("AND job_type = ANY ($3) AND queue = ANY ($4)"), PICK_ARGS},
    /* Writes deferred claims: jobs $1 with lease tokens $2 (same order),
	 * claimed at $3 by worker $4. The ANY keeps the generic plan on the
	 * primary key whatever it thinks of the join. */
    {Stmt::kWriteDeferredClaims,
     "write deferred claims",
     WRITE_DEFERRED_CLAIMS,
     4,
     {INT8ARRAYOID, UUIDARRAYOID, TIMESTAMPTZOID, TEXTOID}},
    /* The true first pickup key, for the maintenance round's hint backstop. */
    {Stmt::kPickHead,
     "pick head",
     "SELECT -(priority::bigint), id FROM pqrun.job_live WHERE status = 'READY' AND NOT delayed"
     " ORDER BY (-(priority::bigint)), id LIMIT 1",
     0,
     {}},
    {Stmt::kFinishRunning,
     "finish running",
     "WITH gone AS (DELETE FROM pqrun.job_live WHERE id = $1 AND status = 'RUNNING'"
     "   AND ($2::uuid IS NULL OR lease_token = $2) AND ($7 OR fifo_key IS NULL) RETURNING *)" FINISH_FROM_GONE,
     7,
     {INT8OID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, BOOLOID}},
    /* mark_done_batch: the running jobs of $1 (with the leases $2, in the
	 * same order, when given) that belong to no FIFO group (those need their
	 * group lock first). */
    {Stmt::kFinishRunningBatch,
     "finish running batch",
     "WITH gone AS (DELETE FROM pqrun.job_live j WHERE j.id = ANY ($1) AND j.status = 'RUNNING'"
     "   AND j.fifo_key IS NULL AND ($2 IS NULL OR (j.id, j.lease_token) IN"
     "     (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))))"
     "   RETURNING j.*)" FINISH_FROM_GONE,
     6,
     {INT8ARRAYOID, UUIDARRAYOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}},
    {Stmt::kFinishAny,
     "finish any",
     "WITH gone AS (DELETE FROM pqrun.job_live WHERE id = $1 AND $2::uuid IS NULL RETURNING *)" FINISH_FROM_GONE,
     6,
     {INT8OID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}},
    {Stmt::kLockRunning,
     "lock running",
     "SELECT attempts, max_attempts FROM pqrun.job_live WHERE id = $1 AND status = 'RUNNING'"
     "   AND ($2::uuid IS NULL OR lease_token = $2) AND ($3 OR fifo_key IS NULL) FOR UPDATE",
     3,
     {INT8OID, UUIDOID, BOOLOID}},
    {Stmt::kFifoKeyOf, "fifo key of", "SELECT fifo_key FROM pqrun.job_live WHERE id = $1", 1, {INT8OID}},
    /* Ends the running attempt of job $1 with outcome $4 and error $3 and makes
	 * the job READY again at $2; the attempt goes to the history table. */
    {Stmt::kRequeue,
     "requeue",
     "WITH logged AS ("
     "  INSERT INTO pqrun.attempt_log (job_id, attempt, started_at, finished_at, worker_id, outcome, error)"
     "  SELECT id, attempts, locked_at, pg_catalog.now(), locked_by, $4, $3 FROM pqrun.job_live"
     "   WHERE id = $1 AND status = 'RUNNING')"
     " UPDATE pqrun.job_live SET status = 'READY', delayed = $2 > pg_catalog.now(), run_after = $2,"
     "   last_error = $3, locked_at = NULL, locked_by = NULL, lease_token = NULL, heartbeat_at = NULL,"
     "   holder_pid = NULL, " CLEAR_HOLDER_STARTED "updated_at = pg_catalog.now()"
     " WHERE id = $1 AND status = 'RUNNING' RETURNING queue, job_type, priority, id, delayed, run_after",
     4,
     {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID}},
    {Stmt::kHeartbeat,
     "heartbeat",
     "UPDATE pqrun.job_live SET heartbeat_at = pg_catalog.clock_timestamp(),"
     "   holder_pid = pg_catalog.pg_backend_pid(), " SET_HOLDER_STARTED "updated_at = pg_catalog.now()"
     " WHERE id = $1 AND status = 'RUNNING' AND ($2::uuid IS NULL OR lease_token = $2) RETURNING id",
     2,
     {INT8OID, UUIDOID}},
    {Stmt::kJobState,
     "job state",
     "SELECT status::text, lease_token, fifo_key FROM pqrun.job_live WHERE id = $1"
     " UNION ALL SELECT status::text, lease_token, fifo_key FROM pqrun.job_done WHERE id = $1",
     1,
     {INT8OID}},
    {Stmt::kDropEdgesOf, "drop edges of", "DELETE FROM pqrun.job_dep WHERE job_id = $1", 1, {INT8OID}},
    {Stmt::kTakeDependents,
     "take dependents",
     "DELETE FROM pqrun.job_dep WHERE dep_id = $1 RETURNING job_id",
     1,
     {INT8OID}},
    {Stmt::kBlockedFifoKey,
     "blocked fifo key",
     "SELECT fifo_key FROM pqrun.job_live WHERE id = $1 AND status = 'BLOCKED'",
     1,
     {INT8OID}},
    {Stmt::kLockBlocked,
     "lock blocked",
     "SELECT 1 FROM pqrun.job_live WHERE id = $1 AND status = 'BLOCKED' FOR UPDATE",
     1,
     {INT8OID}},
    /* Must run after the row lock of kLockBlocked was granted, so that its
	 * snapshot sees what the transactions it waited for committed. */
    {Stmt::kReleaseIfFree,
     "release if free",
     "UPDATE pqrun.job_live j SET status = 'READY', delayed = j.run_after > pg_catalog.now(),"
     "   updated_at = pg_catalog.now()"
     " WHERE j.id = $1 AND j.status = 'BLOCKED'"
     "   AND NOT EXISTS (SELECT 1 FROM pqrun.job_dep d WHERE d.job_id = j.id)"
     "   AND (j.fifo_key IS NULL OR NOT EXISTS (SELECT 1 FROM pqrun.job_live o"
     "        WHERE o.fifo_key = j.fifo_key AND o.id < j.id))"
     " RETURNING j.queue, j.job_type, j.priority, j.id, j.delayed, j.run_after",
     1,
     {INT8OID}},
    {Stmt::kFifoHead,
     "fifo head",
     "SELECT id FROM pqrun.job_live WHERE fifo_key = $1 ORDER BY id LIMIT 1",
     1,
     {TEXTOID}},
    {Stmt::kStale,
     "stale",
     "SELECT id, fifo_key FROM pqrun.job_live"
     " WHERE status = 'RUNNING'"
     "   AND COALESCE(heartbeat_at, locked_at) < pg_catalog.now() - COALESCE(timeout_seconds * '1 second'::interval, "
     "$1)"
     " ORDER BY id",
     1,
     {INTERVALOID}},
    {Stmt::kLockStale,
     "lock stale",
     "SELECT attempts >= max_attempts FROM pqrun.job_live"
     " WHERE id = $1 AND status = 'RUNNING'"
     "   AND COALESCE(heartbeat_at, locked_at) < pg_catalog.now() - COALESCE(timeout_seconds * '1 second'::interval, "
     "$2)"
     " FOR UPDATE SKIP LOCKED",
     2,
     {INT8OID, INTERVALOID}},
    {Stmt::kRetryFinished,
     "retry finished",
     "WITH gone AS (DELETE FROM pqrun.job_done WHERE id = $1 AND status IN ('FAILED', 'CANCELLED') RETURNING *),"
     " logged AS ("
     "  INSERT INTO pqrun.attempt_log (job_id, attempt, started_at, finished_at, worker_id, outcome, error)"
     "  SELECT id, attempts, locked_at, finished_at, locked_by, outcome, last_error FROM gone"
     "   WHERE outcome IS NOT NULL)"
     " INSERT INTO pqrun.job_live (id, status, priority, attempts, max_attempts, timeout_seconds, run_after,"
     "   created_at, updated_at, queue, job_type, dedupe_key, fifo_key, depends_on, last_error, payload)"
     " SELECT id, $2::pqrun.job_status, priority, attempts, max_attempts, timeout_seconds, pg_catalog.now(),"
     "   created_at, pg_catalog.now(), queue, job_type, dedupe_key, fifo_key, depends_on, last_error, payload"
     " FROM gone RETURNING queue, job_type, priority, id",
     2,
     {INT8OID, TEXTOID}},
    {Stmt::kDedupeHolder,
     "dedupe holder",
     "SELECT l.id FROM pqrun.job_done d JOIN pqrun.job_live l ON l.dedupe_key = d.dedupe_key WHERE d.id = $1",
     1,
     {INT8OID}},
    {Stmt::kLiveByDedupe, "live by dedupe", "SELECT id FROM pqrun.job_live WHERE dedupe_key = $1", 1, {TEXTOID}},
    {Stmt::kPurge,
     "purge",
     "WITH gone AS (DELETE FROM pqrun.job_done WHERE status::text = ANY ($2::text[])"
     "   AND finished_at < pg_catalog.now() - $1 RETURNING id, queue, job_type, status),"
     " history AS (DELETE FROM pqrun.attempt_log a USING gone WHERE a.job_id = gone.id)"
     " SELECT queue, job_type, status::text, pg_catalog.count(*) FROM gone GROUP BY 1, 2, 3",
     2,
     {INTERVALOID, TEXTOID}},
    /* Dependency edges whose dependency has already finished: the backstop for
	 * anything the synchronous unblocking in mark_done/mark_error missed. */
    {Stmt::kStrandedEdges,
     "stranded edges",
     "SELECT d.dep_id, f.status::text FROM pqrun.job_dep d JOIN pqrun.job_done f ON f.id = d.dep_id"
     " GROUP BY d.dep_id, f.status ORDER BY d.dep_id LIMIT 1000",
     0,
     {}},
    {Stmt::kStrandedBlocked,
     "stranded blocked",
     "SELECT j.id FROM pqrun.job_live j WHERE j.status = 'BLOCKED'"
     "   AND NOT EXISTS (SELECT 1 FROM pqrun.job_dep d WHERE d.job_id = j.id)"
     "   AND (j.fifo_key IS NULL OR NOT EXISTS (SELECT 1 FROM pqrun.job_live o"
     "        WHERE o.fifo_key = j.fifo_key AND o.id < j.id))"
     " ORDER BY j.id LIMIT 1000",
     0,
     {}},
    {Stmt::kRunningHolders,
     "running holders",
     "SELECT id, holder_pid, fifo_key, " SELECT_HOLDER_STARTED " FROM pqrun.job_live"
     " WHERE status = 'RUNNING' AND holder_pid IS NOT NULL ORDER BY id",
     0,
     {}},
    {Stmt::kLockOrphan,
     "lock orphan",
     "SELECT attempts >= max_attempts FROM pqrun.job_live"
     " WHERE id = $1 AND status = 'RUNNING' AND holder_pid = $2" SAME_HOLDER_STARTED " FOR UPDATE SKIP LOCKED",
     3,
     {INT8OID, INT4OID, TIMESTAMPTZOID}},
    /* Jobs a restore (pg_dump keeps them) wrote with their own ids, before
	 * the dump's setval of the sequence: new ids must start above them. */
    {Stmt::kIdsAhead,
     "ids ahead",
     "SELECT pg_catalog.setval('pqrun.job_id_seq', ids.top)"
     "  FROM (SELECT GREATEST((SELECT pg_catalog.max(id) FROM pqrun.job_live),"
     "                        (SELECT pg_catalog.max(id) FROM pqrun.job_done)) AS top) AS ids,"
     "       pqrun.job_id_seq AS seq"
     " WHERE ids.top >= CASE WHEN seq.is_called THEN seq.last_value + 1 ELSE seq.last_value END",
     0,
     {}},
    {Stmt::kRetention,
     "retention",
     "WITH gone AS (DELETE FROM pqrun.job_done WHERE id = ANY (ARRAY("
     "   SELECT id FROM pqrun.job_done WHERE finished_at < pg_catalog.now() - $1 LIMIT $2))"
     "   RETURNING id, queue, job_type, status),"
     " history AS (DELETE FROM pqrun.attempt_log a USING gone WHERE a.job_id = gone.id)"
     " SELECT queue, job_type, status::text, pg_catalog.count(*) FROM gone GROUP BY 1, 2, 3",
     2,
     {INTERVALOID, INT4OID}},
    {Stmt::kFinishedCounts,
     "finished counts",
     "SELECT queue, job_type, status::text, pg_catalog.count(*) FROM pqrun.job_done GROUP BY 1, 2, 3 ORDER BY 1, 2",
     0,
     {}},
    {Stmt::kCountersFromTables,
     "counters from tables",
     "SELECT queue, job_type,"
     "   pg_catalog.count(*) FILTER (WHERE status = 'DONE'),"
     "   pg_catalog.count(*) FILTER (WHERE status = 'FAILED'),"
     "   pg_catalog.count(*) FILTER (WHERE status = 'CANCELLED'),"
     "   NULL::bigint, NULL::bigint,"
     "   pg_catalog.count(*) FILTER (WHERE status = 'DONE' AND finished_at > pg_catalog.now() - '5 minutes'::interval),"
     "   NULL::bigint,"
     "   (pg_catalog.avg(duration_ms) FILTER (WHERE status = 'DONE'"
     "       AND finished_at > pg_catalog.now() - '5 minutes'::interval))::float8,"
     "   NULL::float8"
     " FROM pqrun.job_done GROUP BY queue, job_type",
     0,
     {}},
    /* ---- periodic schedules (schedule.cpp) ---- */
    /* Re-running schedule() with the same timing keeps next_run, so a deploy
	 * script does not postpone the schedule; changed timing or a
	 * re-activation starts from the first slot after now ($10). */
    {Stmt::kScheduleUpsert,
     "upsert schedule",
     "INSERT INTO pqrun.periodic AS p (name, key, job_type, payload, priority, queue, cron, run_every, active,"
     "   next_run, created_at, updated_at)"
     " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, pg_catalog.now(), pg_catalog.now())"
     " ON CONFLICT (name, key) DO UPDATE SET job_type = EXCLUDED.job_type, payload = EXCLUDED.payload,"
     "   priority = EXCLUDED.priority, queue = EXCLUDED.queue, cron = EXCLUDED.cron,"
     "   run_every = EXCLUDED.run_every, active = EXCLUDED.active,"
     "   next_run = CASE WHEN p.cron IS DISTINCT FROM EXCLUDED.cron"
     "                     OR p.run_every IS DISTINCT FROM EXCLUDED.run_every"
     "                     OR (EXCLUDED.active AND NOT p.active)"
     "                   THEN EXCLUDED.next_run ELSE p.next_run END,"
     "   updated_at = pg_catalog.now()",
     10,
     {TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, TEXTOID, TEXTOID, INTERVALOID, BOOLOID, TIMESTAMPTZOID}},
    {Stmt::kScheduleRemove,
     "remove schedule",
     "DELETE FROM pqrun.periodic WHERE name = $1 AND key = $2",
     2,
     {TEXTOID, TEXTOID}},
    /* One due row at a time: the caller's own updates move fired rows out of
	 * reach, rows other schedulers hold are skipped, and only one payload is
	 * in memory at once. */
    {Stmt::kScheduleDue,
     "due schedule",
     "SELECT name, key, job_type, payload, priority, queue, cron, run_every, next_run FROM pqrun.periodic"
     " WHERE active AND next_run <= pg_catalog.now() ORDER BY next_run LIMIT 1 FOR UPDATE SKIP LOCKED",
     0,
     {}},
    {Stmt::kScheduleFired,
     "schedule fired",
     "UPDATE pqrun.periodic SET last_run = next_run, last_job_id = $3, next_run = $4,"
     "   updated_at = pg_catalog.now() WHERE name = $1 AND key = $2",
     4,
     {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID}},
    {Stmt::kScheduleSkipped,
     "schedule skipped",
     "UPDATE pqrun.periodic SET next_run = $3, updated_at = pg_catalog.now() WHERE name = $1 AND key = $2",
     3,
     {TEXTOID, TEXTOID, TIMESTAMPTZOID}},
};

static_assert(sizeof(kStmts) / sizeof(kStmts[0]) == static_cast<size_t>(Stmt::kCount),
              "every Stmt needs exactly one definition");

/* Kept plans of this backend, indexed by Stmt; they live in CacheMemoryContext.
 * `adapted` marks plans of statements AsInstalled had to change. */
SPIPlanPtr plans[static_cast<int>(Stmt::kCount)];
bool adapted[static_cast<int>(Stmt::kCount)];

/* What later versions added to the statements, and what the statements say
 * instead until ALTER EXTENSION UPDATE has installed the function that came
 * with the addition: 0.3.0's pqrun._lease_token(), 0.5.0's
 * pqrun._backend_started() (with job_live.holder_started). */
struct Addition {
	const char *function;
	const char *text;
	const char *before;
};
constexpr Addition kAdditions[] = {
    {"_lease_token", LEASE_TOKEN, "pg_catalog.gen_random_uuid()"},
    {"_backend_started", SET_HOLDER_STARTED, ""},
    {"_backend_started", CLEAR_HOLDER_STARTED, ""},
    {"_backend_started", SELECT_HOLDER_STARTED, "NULL::timestamptz AS started"},
    {"_backend_started", SAME_HOLDER_STARTED, ""},
};

bool
Installed(const char *function)
{
	return OidIsValid(
	    LookupFuncName(list_make2(makeString(pstrdup("pqrun")), makeString(pstrdup(function))), 0, nullptr, true));
}

const char *
ReplaceAll(const char *sql, const char *text, const char *with)
{
	StringInfoData out;
	initStringInfo(&out);
	for (const char *at; (at = strstr(sql, text)) != nullptr; sql = at + strlen(text)) {
		appendBinaryStringInfo(&out, sql, static_cast<int>(at - sql));
		appendStringInfoString(&out, with);
	}
	appendStringInfoString(&out, sql);
	return out.data;
}

/* AsInstalled answers `sql` as the installed SQL objects can run it: `sql`
 * itself when they are current. */
const char *
AsInstalled(const char *sql)
{
	for (const Addition &addition : kAdditions)
		if (strstr(sql, addition.text) != nullptr && !Installed(addition.function))
			sql = ReplaceAll(sql, addition.text, addition.before);
	return sql;
}

SPIPlanPtr
PlanFor(Stmt stmt)
{
	int index = static_cast<int>(stmt);
	const StmtDef &def = kStmts[index];
	/* An adapted plan is given up as soon as ALTER EXTENSION UPDATE has
	 * run: its statement would leave holder_started behind holder_pid. */
	if (plans[index] != nullptr && adapted[index] && AsInstalled(def.sql) == def.sql) {
		SPI_freeplan(plans[index]);
		plans[index] = nullptr;
	}
	if (plans[index] == nullptr) {
		if (def.stmt != stmt)
			elog(ERROR, "pqrun: statement table out of order at \"%s\"", def.name);
		/* Generic plans: every statement is written so that its generic plan is
		 * the right one, and re-planning on each call would cost more than
		 * most of the statements take to run. */
		const char *sql = AsInstalled(def.sql);
		SPIPlanPtr plan = SPI_prepare_cursor(sql, def.nargs, const_cast<Oid *>(def.argtypes), CURSOR_OPT_GENERIC_PLAN);
		if (plan == nullptr)
			elog(ERROR, "pqrun: could not prepare \"%s\": %s", def.name, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pqrun: could not keep plan \"%s\"", def.name);
		plans[index] = plan;
		adapted[index] = sql != def.sql;
	}
	return plans[index];
}

} // namespace

void
Connect()
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
}

void
Finish()
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "pqrun: SPI_finish failed");
}

uint64
Exec(Stmt stmt, Datum *values, const char *nulls, int expected_rc, long count)
{
	int rc = SPI_execute_plan(PlanFor(stmt), values, nulls, false, count);
	if (rc != expected_rc)
		elog(ERROR, "pqrun: statement \"%s\" failed: %s", kStmts[static_cast<int>(stmt)].name,
		     SPI_result_code_string(rc));
	return SPI_processed;
}

uint64
ExecInto(Stmt stmt, Datum *values, const char *nulls, DestReceiver *dest)
{
	const StmtDef &def = kStmts[static_cast<int>(stmt)];
	ParamListInfo params = makeParamList(def.nargs);
	for (int i = 0; i < def.nargs; i++) {
		ParamExternData &param = params->params[i];
		param.value = values[i];
		param.isnull = nulls != nullptr && nulls[i] == 'n';
		param.pflags = PARAM_FLAG_CONST;
		param.ptype = def.argtypes[i];
	}
	SPIExecuteOptions options{};
	options.params = params;
	options.dest = dest;
	int rc = SPI_execute_plan_extended(PlanFor(stmt), &options);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "pqrun: statement \"%s\" failed: %s", def.name, SPI_result_code_string(rc));
	return SPI_processed;
}

} // namespace pqrun::spi
