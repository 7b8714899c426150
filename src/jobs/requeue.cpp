/* src/jobs/requeue.cpp — a running job that did not finish: mark_error's
 * retry, the reaper, a job its worker gives back (release, snooze), and the
 * heartbeat that keeps it from being reaped.
 *
 * A retry ends the running attempt into pqrun.attempt_log and makes the job
 * READY again (delayed by its backoff); an attempt that was the last one
 * finishes the job FAILED (finish.cpp). Orphan rescue (maintenance.cpp)
 * ends attempts the same way. A job given back was never attempted: its
 * attempt is taken back and nothing goes to the history.
 */
#include "jobs/job_row.hpp"
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"
#include "pg/citus.hpp"

#include "guc.hpp"
#include "jobs/flow_control.hpp"
#include "pg/client_wait.hpp"
#include "pg/compat.hpp"
#include "pg/spi_rows.hpp"
#include "pure/backoff.hpp"
#include "shmem/stats.hpp"
#include "xact/wake.hpp"

namespace pqrun::jobs {

namespace stmts {

spi::Statement kLockRunning{"lock running",
                            "SELECT attempts, max_attempts FROM pqrun.job_live WHERE id = $1 AND status = 'RUNNING'"
                            "   AND ($2::uuid IS NULL OR lease_token = $2) AND ($3 OR fifo_key IS NULL) FOR UPDATE",
                            3,
                            {INT8OID, UUIDOID, BOOLOID}};

/* Ends the running attempt of job $1 with outcome $4 and error $3 and makes
 * the job READY again at $2; the attempt goes to the history table. */
#define REQUEUE                                                                                                        \
	"WITH logged AS ("                                                                                               \
	"  INSERT INTO pqrun.attempt_log (job_id, attempt, started_at, finished_at, worker_id, outcome, error)"          \
	"  SELECT id, attempts, locked_at, pg_catalog.now(), locked_by, $4, $3 FROM pqrun.job_live"                      \
	"   WHERE id = $1 AND status = 'RUNNING')"                                                                       \
	" UPDATE pqrun.job_live SET status = 'READY', delayed = $2 > pg_catalog.now(), run_after = $2,"                  \
	"   last_error = $3, locked_at = NULL, locked_by = NULL, lease_token = NULL, heartbeat_at = NULL,"               \
	"   holder_pid = NULL, " PQRUN_CLEAR_HOLDER_STARTED "updated_at = pg_catalog.now()"                              \
	" WHERE id = $1 AND status = 'RUNNING' RETURNING queue, job_type, priority, id, delayed, run_after"
/* The attempt stays counted; everything else the claim wrote is undone. */
static_assert(job_row::SetsAll(REQUEUE, " WHERE", job_row::ClaimWrites() & ~job_row::Named({"attempts"})),
              "a requeue must undo what a claim writes (job_row::kColumns)");
spi::Statement kRequeue{
    "requeue",
    REQUEUE,
    4,
    {INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID}};

/* Makes running job $1 READY again at $2 as if it had never been picked
 * up, with $3 added to its snoozes. */
#define GIVE_BACK                                                                                                      \
	"UPDATE pqrun.job_live SET status = 'READY', delayed = $2 > pg_catalog.now(), run_after = $2,"                   \
	"   attempts = GREATEST(attempts - 1, 0), snoozes = snoozes + $3, locked_at = NULL, locked_by = NULL,"           \
	"   lease_token = NULL, heartbeat_at = NULL, holder_pid = NULL, holder_started = NULL,"                          \
	"   updated_at = pg_catalog.now()"                                                                               \
	" WHERE id = $1 AND status = 'RUNNING' RETURNING queue, job_type, priority, id, delayed, run_after"
static_assert(job_row::SetsAll(GIVE_BACK, " WHERE", job_row::ClaimWrites()),
              "a give-back must undo everything a claim writes (job_row::kColumns)");
spi::Statement kGiveBack{
    "give back",
    GIVE_BACK,
    3,
    {INT8OID, TIMESTAMPTZOID, INT4OID}};

spi::Statement kHeartbeat{
    "heartbeat",
    "UPDATE pqrun.job_live SET heartbeat_at = pg_catalog.clock_timestamp(), " PQRUN_SET_PROGRESS
    "   " PQRUN_SET_HOLDER(PQRUN_HELD_AS_BEFORE) "updated_at = pg_catalog.now()"
    " WHERE id = $1 AND status = 'RUNNING' AND ($2::uuid IS NULL OR lease_token = $2) RETURNING id",
    3,
    {INT8OID, UUIDOID, JSONBOID}};

/* Whether job $1 was finished DONE or FAILED under lease $2: by its own
 * worker, since only the holder of a lease has it. */
spi::Statement kFinishedUnder{"finished under",
                              "SELECT EXISTS (SELECT FROM pqrun.job_done WHERE id = $1 AND lease_token = $2"
                              "   AND status IN ('DONE', 'FAILED'))",
                              2,
                              {INT8OID, UUIDOID}};

/* The stale window (s) of job $1 while it is running under lease $2. */
spi::Statement kHeldWindow{"held window",
                           "SELECT COALESCE(timeout_seconds, $3) FROM pqrun.job_live WHERE id = $1"
                           "   AND status = 'RUNNING' AND ($2::uuid IS NULL OR lease_token = $2)",
                           3,
                           {INT8OID, UUIDOID, INT4OID}};

#define PQRUN_IS_STALE(window)                                                                                         \
	"COALESCE(heartbeat_at, locked_at) < pg_catalog.now() - COALESCE(timeout_seconds * '1 second'::interval, " window ")"
spi::Statement kStale{"stale",
                      "SELECT id, fifo_key FROM pqrun.job_live WHERE status = 'RUNNING' AND " PQRUN_IS_STALE("$1")
                      " ORDER BY id",
                      1,
                      {INTERVALOID}};

/* The RUNNING jobs after id $2, kRunningWindow of them in id order
 * (job_live_running), each with whether it is stale: a maintenance round
 * looks at these only (ReapStale). */
spi::Statement kStaleWindow{"stale window",
                            "SELECT id, fifo_key, " PQRUN_IS_STALE("$1") " FROM pqrun.job_live"
                            " WHERE status = 'RUNNING' AND id > $2 ORDER BY id LIMIT 1000",
                            2,
                            {INTERVALOID, INT8OID}};

spi::Statement kLockStale{
    "lock stale",
    "SELECT attempts >= max_attempts FROM pqrun.job_live"
    " WHERE id = $1 AND status = 'RUNNING'"
    "   AND COALESCE(heartbeat_at, locked_at) < pg_catalog.now() - COALESCE(timeout_seconds * '1 second'::interval, "
    "$2)"
    " FOR UPDATE SKIP LOCKED",
    2,
    {INT8OID, INTERVALOID}};

} // namespace stmts

using namespace spi;

void
Requeue(int64 job_id, TimestampTz run_after, const char *error, const char *outcome)
{
	Datum values[4];
	char nulls[5] = "    ";
	values[0] = Int64GetDatum(job_id);
	values[1] = TimestampTzGetDatum(run_after);
	values[2] = TextOrNull(error, &nulls[2]);
	values[3] = CStringGetTextDatum(outcome);
	uint64 n = Exec(stmts::kRequeue, values, nulls, SPI_OK_UPDATE_RETURNING);
	if (n > 0) {
		const char *queue = ColText(0, 1), *job_type = ColText(0, 2);
		stats::Errored(queue, job_type);
		flow_control::NoteEnded(queue, job_type, job_id);
	}
	NoteRows(n, ReadyRows::kMaybeDelayed);
}

namespace {

/* The wait event of a waiting heartbeat (compat::ExtensionWaitEvent). */
uint32 heartbeat_wait_event = 0;

/* LockRunning row-locks job `job_id` while it runs (under `lease` when
 * given), after its FIFO group's lock when it has a group, or raises as a
 * mark does; its attempts and max_attempts are then row 0 of the result. */
void
LockRunning(int64 job_id, Datum lease, bool has_lease)
{
	Datum values[3] = {Int64GetDatum(job_id), lease, BoolGetDatum(false)};
	char nulls[4] = {' ', has_lease ? ' ' : 'n', ' ', '\0'};
	if (Exec(stmts::kLockRunning, values, nulls, SPI_OK_SELECT) == 0) {
		values[2] = BoolGetDatum(true);
		if (!LockGroupOf(job_id) || Exec(stmts::kLockRunning, values, nulls, SPI_OK_SELECT) == 0)
			RaiseNotRunning(job_id, lease, has_lease);
	}
}

/* AwaitLeaseEnd sleeps until job `job_id` stops running under `lease`
 * or `wait_ms` pass, but at most half the job's stale window, so that the
 * renewal after it comes in time; it answers whether the job still runs.
 * A cancel wakes it at its commit (wake.cpp); anything else that ends the
 * lease is seen within a second. A job gone otherwise than by its worker's
 * own finish (DONE or FAILED under this lease: the usual end of a waiting
 * heartbeat, not worth an error) raises as a mark does. */
bool
AwaitLeaseEnd(int64 job_id, Datum lease, bool has_lease, int64 wait_ms)
{
	Datum values[3] = {Int64GetDatum(job_id), lease, Int32GetDatum(pqrun_stale_timeout)};
	char nulls[4] = {' ', has_lease ? ' ' : 'n', ' ', '\0'};
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz deadline = TimestampTzPlusMilliseconds(start, wait_ms);
	volatile bool running = true;
	wake::RegisterLeaseWait(job_id);
	PG_TRY();
	{
		for (bool first = true;; first = false) {
			if (Exec(stmts::kHeldWindow, values, nulls, SPI_OK_SELECT) == 0) {
				running =
				    !(has_lease && Exec(stmts::kFinishedUnder, values, nullptr, SPI_OK_SELECT) > 0 && ColBool(0, 1));
				if (!running)
					break;
				RaiseNotRunning(job_id, lease, has_lease);
			}
			if (first) {
				bool isnull;
				int64 window_ms = static_cast<int64>(DatumGetInt32(Col(0, 1, &isnull))) * 1000;
				deadline = Min(deadline, TimestampTzPlusMilliseconds(start, Max(window_ms, 0) / 2));
			}
			long sleep_ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			if (sleep_ms <= 0)
				break;
			(void)client_wait::Sleep(Min(sleep_ms, 1000L),
			                         compat::ExtensionWaitEvent(heartbeat_wait_event, "PqrunHeartbeat"));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		wake::UnregisterLeaseWait();
	}
	PG_END_TRY();
	return running;
}

} // namespace

JobStatus
MarkError(int64 job_id, const char *error, bool terminal, Datum lease, bool has_lease, const Interval *retry_after)
{
	error = ClipError(error);
	citus::EnterJob(job_id);
	LockRunning(job_id, lease, has_lease);
	bool isnull;
	int32 attempts = DatumGetInt32(Col(0, 1, &isnull));
	int32 max_attempts = DatumGetInt32(Col(0, 2, &isnull));

	if (terminal || attempts >= max_attempts) {
		FinishRunning(job_id, lease, has_lease, JobStatus::kFailed, "failed", error, Datum(0), true);
		return JobStatus::kFailed;
	}
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz run_after =
	    retry_after ? DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now),
	                                                          PointerGetDatum(retry_after)))
	                : now + backoff::DelayFor(guc::Backoff(), attempts);
	Requeue(job_id, run_after, error, "retry");
	return JobStatus::kReady;
}

void
GiveBack(int64 job_id, Datum lease, bool has_lease, TimestampTz run_after, bool snooze)
{
	citus::EnterJob(job_id);
	LockRunning(job_id, lease, has_lease);
	Datum values[3] = {Int64GetDatum(job_id), TimestampTzGetDatum(run_after), Int32GetDatum(snooze ? 1 : 0)};
	uint64 n = Exec(stmts::kGiveBack, values, nullptr, SPI_OK_UPDATE_RETURNING);
	if (n > 0)
		flow_control::NoteEnded(ColText(0, 1), ColText(0, 2), job_id);
	NoteRows(n, ReadyRows::kMaybeDelayed);
}

void
Heartbeat(int64 job_id, Datum lease, bool has_lease, Datum progress, bool has_progress, int64 wait_ms)
{
	citus::EnterJob(job_id);
	if (wait_ms > 0 && !AwaitLeaseEnd(job_id, lease, has_lease, wait_ms))
		return;
	Datum values[3] = {Int64GetDatum(job_id), lease, progress};
	char nulls[4] = {' ', has_lease ? ' ' : 'n', has_progress ? ' ' : 'n', '\0'};
	if (Exec(stmts::kHeartbeat, values, nulls, SPI_OK_UPDATE_RETURNING) == 0)
		RaiseNotRunning(job_id, lease, has_lease);
}

int32
ReapStale(const Interval *default_stale_after, int64 *after)
{
	Datum values[2] = {PointerGetDatum(default_stale_after), Int64GetDatum(after ? *after : 0)};
	IdList stale;
	if (after == nullptr) {
		stale = CopyIds(Exec(stmts::kStale, values, nullptr, SPI_OK_SELECT), true);
	} else {
		uint64 n = Exec(stmts::kStaleWindow, values, nullptr, SPI_OK_SELECT);
		/* Past the last RUNNING job: from the first at once, so that a
		 * call looks at jobs whenever some run. The cursor is shared with
		 * the rounds, whose stale window need not be this call's: a
		 * reap_stale that finds only the empty tail each time a round has
		 * moved the cursor there would reap nothing, call after call. */
		if (n == 0 && *after != 0) {
			values[1] = Int64GetDatum(0);
			n = Exec(stmts::kStaleWindow, values, nullptr, SPI_OK_SELECT);
		}
		IdList window = CopyIds(n, true);
		*after = n < static_cast<uint64>(kRunningWindow) ? 0 : window.ids[n - 1];
		stale.ids = window.ids;
		stale.labels = window.labels;
		stale.count = 0;
		for (uint64 i = 0; i < n; i++)
			if (ColBool(i, 3)) {
				stale.ids[stale.count] = window.ids[i];
				stale.labels[stale.count++] = window.labels[i];
			}
	}
	const char *error = "timed out: no heartbeat within the stale window";
	int32 reaped = 0;
	/* Group locks before the row locks; then make sure each is still stale
	 * and not held by a worker finishing it right now. */
	LockFifoGroups(stale.labels, static_cast<int>(stale.count));
	for (uint64 i = 0; i < stale.count; i++) {
		Datum lock_values[2] = {Int64GetDatum(stale.ids[i]), PointerGetDatum(default_stale_after)};
		if (Exec(stmts::kLockStale, lock_values, nullptr, SPI_OK_SELECT) == 0)
			continue;
		if (ColBool(0, 1))
			FinishRunning(stale.ids[i], Datum(0), false, JobStatus::kFailed, "stale", error, Datum(0), true);
		else
			Requeue(stale.ids[i], GetCurrentTransactionStartTimestamp(), error, "stale");
		reaped++;
	}
	return reaped;
}

} // namespace pqrun::jobs
