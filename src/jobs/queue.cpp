/* src/jobs/queue.cpp — what the job operations share: FIFO group locks,
 * a job's state, and the rules that keep them safe together.
 *
 * The job state machine (docs/api.md, "Job states") is one file per operation:
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
 *  - a call that needs several groups (enqueue_batch without dependencies,
 *    mark_done_batch, the reaper and the orphan rescue) takes them all
 *    first, in the order of their lock keys (LockFifoGroups), whatever the
 *    order of its input;
 *  - an enqueue with dependencies locks their rows before its own group,
 *    since finishing a dependency takes its dependents' groups after its
 *    row (so an enqueue_batch with dependencies keeps element order);
 *  - rows are locked in id order wherever one transaction locks several
 *    (dependents, stale and orphaned jobs, the backstops), so that two
 *    transactions never wait for each other's rows (40P01).
 */
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"
#include "pg/citus.hpp"

#include "pg/spi_rows.hpp"
#include "xact/next_due.hpp"
#include "xact/wake.hpp"

#include <algorithm>

namespace pqrun::jobs {

namespace stmts {

spi::Statement kFifoBusy{"fifo busy", "SELECT 1 FROM pqrun.job_live WHERE fifo_key = $1 LIMIT 1", 1, {TEXTOID}};

/* The queue of a job with a concurrency key, which its enqueue marked
 * keyed (flow_control::NoteKeyed). */
#define KEYED_QUEUE "CASE WHEN concurrency_key IS NOT NULL THEN queue END"
spi::Statement kJobState{"job state",
                         "SELECT status::text, lease_token, fifo_key, " KEYED_QUEUE " FROM pqrun.job_live WHERE id = $1"
                         " UNION ALL SELECT status::text, lease_token, fifo_key, " KEYED_QUEUE
                         " FROM pqrun.job_done WHERE id = $1",
                         1,
                         {INT8OID}};

spi::Statement kInOtherQueue{"in another queue",
                             "SELECT id FROM pqrun.job_live WHERE id = ANY ($1) AND queue <> $2"
                             " UNION ALL SELECT id FROM pqrun.job_done WHERE id = ANY ($1) AND queue <> $2 LIMIT 1",
                             2,
                             {INT8ARRAYOID, TEXTOID}};

spi::Statement kFifoKeyOf{"fifo key of", "SELECT fifo_key FROM pqrun.job_live WHERE id = $1", 1, {INT8OID}};

spi::Statement kFifoKeysOf{"fifo keys of",
                           "SELECT fifo_key FROM pqrun.job_live WHERE id = ANY ($1) AND fifo_key IS NOT NULL",
                           1,
                           {INT8ARRAYOID}};

} // namespace stmts

using namespace spi;

namespace {

constexpr int kMaxErrorChars = 10000;

/* A FIFO group's lock is the transaction-level advisory lock
 * pg_advisory_xact_lock(kFifoLockClass, hashtext(fifo_key) & 1023) would
 * take, so that operators can see it in pg_locks as such: one of
 * kFifoLockBuckets, which groups share, so that a call into 20,000 groups
 * takes 1,024 locks at most instead of filling the server's lock table
 * (53200). Groups that share a bucket only wait for each other's writes. */
constexpr uint32 kFifoLockClass = 1886745198;
constexpr uint32 kFifoLockBuckets = 1024;

uint32
GroupHash(const char *fifo_key)
{
	return static_cast<uint32>(DatumGetInt32(
	           DirectFunctionCall1Coll(hashtext, DEFAULT_COLLATION_OID, CStringGetTextDatum(fifo_key)))) &
	       (kFifoLockBuckets - 1);
}

void
LockGroupHash(uint32 hash)
{
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, kFifoLockClass, hash, 2);
	(void)LockAcquire(&tag, ExclusiveLock, false, false);
}

} // namespace

void
LockFifoGroup(const char *fifo_key)
{
	LockGroupHash(GroupHash(fifo_key));
}

/* LockFifoGroups takes the locks of several groups in one order, the
 * order of their lock keys, so that two calls that each take several never
 * wait for each other whatever the order of their input. */
void
LockFifoGroups(char *const *fifo_keys, int n)
{
	auto *hashes = static_cast<uint32 *>(palloc(sizeof(uint32) * (n + 1)));
	int count = 0;
	for (int i = 0; i < n; i++)
		if (fifo_keys[i] != nullptr)
			hashes[count++] = GroupHash(fifo_keys[i]);
	std::sort(hashes, hashes + count);
	for (int i = 0; i < count; i++)
		if (i == 0 || hashes[i] != hashes[i - 1])
			LockGroupHash(hashes[i]);
	pfree(hashes);
}

JobState
StateOf(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(stmts::kJobState, values, nullptr, SPI_OK_SELECT) == 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND), errmsg("job %lld does not exist", (long long)job_id)));
	JobState state{ParseStatus(ColText(0, 1)), false, {}, ColText(0, 3), ColText(0, 4)};
	Datum lease = Col(0, 2, &state.has_lease);
	state.has_lease = !state.has_lease;
	if (state.has_lease)
		state.lease_token = *DatumGetUUIDP(lease);
	return state;
}

void
InQueue(const char *queue, ArrayType *job_ids)
{
	citus::EnterQueue(queue);
	Datum values[2] = {PointerGetDatum(job_ids), CStringGetTextDatum(queue)};
	if (Exec(stmts::kInOtherQueue, values, nullptr, SPI_OK_SELECT) > 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
		                errmsg("job %lld is not in queue \"%s\"", static_cast<long long>(ColInt64(0, 1)), queue)));
}

/* RaiseNotRunning explains why a mark/heartbeat matched no running job:
 * unknown id (P0002), not running or stale lease (55000), or, running under
 * the lease given (or none given), a write an operator's trigger or rule on
 * pqrun's tables suppressed (27000). */
void
RaiseNotRunning(int64 job_id, Datum lease, bool has_lease)
{
	JobState state = StateOf(job_id);
	if (state.status != JobStatus::kRunning)
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("job %lld is not running", (long long)job_id),
		                errdetail("Its status is %s.", StatusName(state.status))));
	if (!has_lease || (state.has_lease && memcmp(state.lease_token.data, DatumGetUUIDP(lease), UUID_LEN) == 0))
		ereport(ERROR, (errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
		                errmsg("a trigger or rule on pqrun's tables suppressed the change of job %lld", (long long)job_id),
		                errdetail("The job is unchanged.")));
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

/* LockGroupsOf takes, with LockFifoGroups, the group locks of the
 * unfinished jobs among `ids` that belong to a group. */
void
LockGroupsOf(const int64 *ids, int n)
{
	if (n < 2) /* one group needs no order; its job's own lookup takes it */
		return;
	Datum values[1] = {Int8Array(ids, n)};
	uint64 rows = Exec(stmts::kFifoKeysOf, values, nullptr, SPI_OK_SELECT);
	auto **keys = static_cast<char **>(palloc(sizeof(char *) * (rows + 1)));
	for (uint64 i = 0; i < rows; i++)
		keys[i] = ColText(i, 1);
	LockFifoGroups(keys, static_cast<int>(rows));
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
			next_due::NoteDelayed(DatumGetTimestampTz(Col(i, 6, &isnull)));
			continue;
		}
		wake::NoteReady(ColText(i, 1), ColText(i, 2), pick_hint::KeyOf(DatumGetInt32(Col(i, 3, &isnull)), ColInt64(i, 4)));
	}
}

} // namespace pqrun::jobs
