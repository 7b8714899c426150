/* src/jobs/queue.cpp — what the job operations share: FIFO group locks,
 * a job's state, and the rules that keep them safe together.
 *
 * The job state machine (README, "Job states") is one file per operation:
 * enqueue.cpp, pick.cpp, finish.cpp, requeue.cpp (mark_error, reap,
 * heartbeat) and operate.cpp (cancel, retry, purge). A job
 * lives in pqrun.job_live while BLOCKED/READY/RUNNING and moves to
 * pqrun.job_done when it finishes; finishing a job then releases its
 * dependents (or cancels them) and advances its FIFO group, in the same
 * transaction. Locking rules that make this safe under concurrency:
 *  - a dependent's enqueue row-locks its unfinished dependencies, so a
 *    dependency cannot finish unseen while the edge is being written;
 *  - releasing a BLOCKED job locks its row first and only then looks at the
 *    remaining edges, with a snapshot taken after the lock was granted;
 *  - everything that changes a FIFO group's membership or head holds the
 *    group's transaction-level advisory lock first;
 *  - so the order is always: group lock, then dependency edges, then rows;
 *  - rows are locked in id order wherever one transaction locks several
 *    (dependents, stale and orphaned jobs, the backstops), so that two
 *    transactions never wait for each other's rows (40P01).
 */
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"

#include "pg/spi_rows.hpp"
#include "xact/wake.hpp"

namespace pqrun::queue {

namespace stmts {

spi::Statement kFifoLock{
    "fifo lock", "SELECT pg_catalog.pg_advisory_xact_lock(1886745198, pg_catalog.hashtext($1))", 1, {TEXTOID}};

spi::Statement kFifoBusy{"fifo busy", "SELECT 1 FROM pqrun.job_live WHERE fifo_key = $1 LIMIT 1", 1, {TEXTOID}};

spi::Statement kJobState{"job state",
                         "SELECT status::text, lease_token, fifo_key FROM pqrun.job_live WHERE id = $1"
                         " UNION ALL SELECT status::text, lease_token, fifo_key FROM pqrun.job_done WHERE id = $1",
                         1,
                         {INT8OID}};

spi::Statement kFifoKeyOf{"fifo key of", "SELECT fifo_key FROM pqrun.job_live WHERE id = $1", 1, {INT8OID}};

} // namespace stmts

using namespace spi;

namespace {

constexpr int kMaxErrorChars = 10000;

} // namespace

void
LockFifoGroup(const char *fifo_key)
{
	Datum values[1] = {CStringGetTextDatum(fifo_key)};
	Exec(stmts::kFifoLock, values, nullptr, SPI_OK_SELECT);
}

/* JobState answers the status of job `job_id` (its row stays the last
 * result: status, lease_token, fifo_key), raising P0002 for an unknown id. */
JobStatus
JobState(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(stmts::kJobState, values, nullptr, SPI_OK_SELECT) == 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND), errmsg("job %lld does not exist", (long long)job_id)));
	return ParseStatus(ColText(0, 1));
}

/* RaiseNotRunning explains why a mark/heartbeat matched no running job:
 * unknown id (P0002), not running or stale lease (55000). */
void
RaiseNotRunning(int64 job_id, Datum lease, bool has_lease)
{
	JobStatus status = JobState(job_id);
	if (status != JobStatus::kRunning)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("job %lld is not running", (long long)job_id),
		                errdetail("Its status is %s.", StatusName(status))));
	ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	                errmsg("lease token does not match the current lease of job %lld", (long long)job_id),
	                errdetail("The job was reaped, cancelled or picked up again since this lease was issued.")));
}

int
CompareIds(const void *a, const void *b)
{
	int64 x = *static_cast<const int64 *>(a);
	int64 y = *static_cast<const int64 *>(b);
	return x < y ? -1 : x > y;
}

/* LockGroupOf takes the FIFO group lock of unfinished job `job_id` if it
 * belongs to a group, and answers whether it does. Lock order everywhere:
 * group lock, then dependency edges, then job rows; a job's fifo_key never
 * changes, so reading it unlocked first is safe. */
bool
LockGroupOf(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(stmts::kFifoKeyOf, values, nullptr, SPI_OK_SELECT) == 0)
		return false;
	char *fifo_key = ColText(0, 1);
	if (fifo_key)
		LockFifoGroup(fifo_key);
	return fifo_key != nullptr;
}

/* ClipError cuts an error or reason kept in last_error to kMaxErrorChars
 * characters. */
const char *
ClipError(const char *error)
{
	return error ? pnstrdup(error, pg_mbcharcliplen(error, strlen(error), kMaxErrorChars)) : nullptr;
}

/* NoteRows reports each row of the last result as a job made READY, or as a
 * delayed one. */
void
NoteRows(uint64 n, ReadyRows layout)
{
	for (uint64 i = 0; i < n; i++) {
		bool isnull;
		if (layout == ReadyRows::kMaybeDelayed && ColBool(i, 5)) {
			wake::NoteDelayed(DatumGetTimestampTz(Col(i, 6, &isnull)));
			continue;
		}
		wake::NoteReady(ColText(i, 1), ColText(i, 2), wake::KeyOf(DatumGetInt32(Col(i, 3, &isnull)), ColInt64(i, 4)));
	}
}

} // namespace pqrun::queue
