/* src/queue.cpp — mark, reap, cancel, retry, unblocking.
 *
 * The logic of the job state machine (README, "Job states") over SPI; claims
 * are in pickup.cpp, enqueues in enqueue.cpp. A job
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
#include "queue.hpp"
#include "queue_internal.hpp"

#include "direct_finish.hpp"
#include "guc.hpp"
#include "spi_plans.hpp"
#include "spi_rows.hpp"
#include "stats.hpp"
#include "wake.hpp"

namespace pqrun::queue {

using namespace spi;

void
LockFifoGroup(const char *fifo_key)
{
	Datum values[1] = {CStringGetTextDatum(fifo_key)};
	Exec(Stmt::kFifoLock, values, nullptr, SPI_OK_SELECT);
}

namespace {

constexpr int kMaxErrorChars = 10000;

/* NoteFinished counts the job just moved to job_done as `status` (row `row`
 * of the last result: has_dependents, fifo_key, queue, job_type, old status,
 * locked_at, id). */
void
NoteFinished(const char *status, uint64 row = 0)
{
	stats::Finished finished;
	if (!stats::ParseFinished(status, &finished))
		return;
	bool isnull;
	Datum locked_at = Col(row, 6, &isnull);
	int64 duration_ms = isnull ? 0 : (GetCurrentTransactionStartTimestamp() - DatumGetTimestampTz(locked_at)) / 1000;
	stats::JobFinished(ColText(row, 3), ColText(row, 4), finished, duration_ms);
}

/* NoteMoved counts a job direct_finish moved to job_done as `status`. */
void
NoteMoved(const direct_finish::Moved &moved, const char *status)
{
	stats::Finished finished;
	if (stats::ParseFinished(status, &finished))
		stats::JobFinished(moved.queue, moved.job_type, finished, moved.duration_ms);
}

/* JobState answers the status of job `job_id` (its row stays the last
 * result: status, lease_token, fifo_key), raising P0002 for an unknown id. */
char *
JobState(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(Stmt::kJobState, values, nullptr, SPI_OK_SELECT) == 0)
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND), errmsg("job %lld does not exist", (long long)job_id)));
	return ColText(0, 1);
}

/* RaiseNotRunning explains why a mark/heartbeat matched no running job:
 * unknown id (P0002), not running or stale lease (55000). */
void
RaiseNotRunning(int64 job_id, Datum lease, bool has_lease)
{
	char *status = JobState(job_id);
	if (!IsStatus(status, "RUNNING"))
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
		                errmsg("job %lld is not running", (long long)job_id), errdetail("Its status is %s.", status)));
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

void
AdvanceFifo(const char *fifo_key)
{
	LockFifoGroup(fifo_key);
	Datum values[1] = {CStringGetTextDatum(fifo_key)};
	if (Exec(Stmt::kFifoHead, values, nullptr, SPI_OK_SELECT) > 0)
		Release(ColInt64(0, 1));
}

/* LockGroupOf takes the FIFO group lock of unfinished job `job_id` if it
 * belongs to a group, and answers whether it does. Lock order everywhere:
 * group lock, then dependency edges, then job rows; a job's fifo_key never
 * changes, so reading it unlocked first is safe. */
bool
LockGroupOf(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(Stmt::kFifoKeyOf, values, nullptr, SPI_OK_SELECT) == 0)
		return false;
	char *fifo_key = ColText(0, 1);
	if (fifo_key)
		LockFifoGroup(fifo_key);
	return fifo_key != nullptr;
}

/* FinishLive moves unfinished job `job_id` to job_done as `status`, whatever
 * its state, then follows up. Answers false if it was not unfinished. */
bool
FinishLive(int64 job_id, const char *status, const char *outcome, const char *error)
{
	LockGroupOf(job_id);
	Datum edge_values[1] = {Int64GetDatum(job_id)};
	Exec(Stmt::kDropEdgesOf, edge_values, nullptr, SPI_OK_DELETE);
	Datum values[6];
	char nulls[7] = "      ";
	values[0] = Int64GetDatum(job_id);
	nulls[1] = 'n';
	values[1] = Datum(0);
	values[2] = CStringGetTextDatum(status);
	values[3] = TextOrNull(outcome, &nulls[3]);
	values[4] = TextOrNull(error, &nulls[4]);
	nulls[5] = 'n';
	values[5] = Datum(0);
	if (Exec(Stmt::kFinishAny, values, nulls, SPI_OK_SELECT) == 0)
		return false;
	NoteFinished(status);
	AfterFinish(job_id, status, ColBool(0, 1), ColText(0, 2));
	return true;
}

} // namespace

/* NoteRemoved counts the finished jobs a purge or retention statement
 * deleted (rows of queue, job_type, status, count) and answers how many. */
int64
NoteRemoved(uint64 n)
{
	int64 total = 0;
	for (uint64 i = 0; i < n; i++) {
		stats::Finished finished;
		int64 count = ColInt64(i, 4);
		total += count;
		if (stats::ParseFinished(ColText(i, 3), &finished))
			stats::FinishedRemoved(ColText(i, 1), ColText(i, 2), finished, count);
	}
	return total;
}

/* Release makes BLOCKED job `job_id` READY if it has no pending dependency
 * and heads its FIFO group. Answers whether it did. */
bool
Release(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(Stmt::kBlockedFifoKey, values, nullptr, SPI_OK_SELECT) == 0)
		return false;
	char *fifo_key = ColText(0, 1);
	if (fifo_key)
		LockFifoGroup(fifo_key);
	if (Exec(Stmt::kLockBlocked, values, nullptr, SPI_OK_SELECT) == 0)
		return false;
	uint64 n = Exec(Stmt::kReleaseIfFree, values, nullptr, SPI_OK_UPDATE_RETURNING);
	NoteRows(n, ReadyRows::kMaybeDelayed);
	return n > 0;
}

/* AfterFinish releases or cancels the dependents of a job that just finished
 * with `status` and lets the next job of its FIFO group run. */
void
AfterFinish(int64 job_id, const char *status, bool has_dependents, const char *fifo_key)
{
	check_stack_depth();
	if (has_dependents) {
		Datum values[1] = {Int64GetDatum(job_id)};
		IdList dependents = CopyIds(Exec(Stmt::kTakeDependents, values, nullptr, SPI_OK_DELETE_RETURNING), false);
		qsort(dependents.ids, dependents.count, sizeof(int64), CompareIds);
		bool done = IsStatus(status, "DONE");
		char *reason = done ? nullptr : psprintf("dependency %lld ended %s", (long long)job_id, status);
		for (uint64 i = 0; i < dependents.count; i++) {
			if (done)
				Release(dependents.ids[i]);
			else
				FinishLive(dependents.ids[i], "CANCELLED", "cancelled", reason);
		}
	}
	if (fifo_key)
		AdvanceFifo(fifo_key);
}

/* FinishRunning ends the running attempt of `job_id` (fenced by the lease
 * when given) with `status`; raises if the job is not running. */
void
FinishRunning(int64 job_id, Datum lease, bool has_lease, const char *status, const char *outcome, const char *error,
              Datum result, bool result_null)
{
	direct_finish::Moved moved;
	if (direct_finish::FinishRunning(job_id, has_lease ? DatumGetUUIDP(lease) : nullptr,
	                                 {status, outcome, error, result, result_null}, &moved)) {
		NoteMoved(moved, status);
		AfterFinish(job_id, status, moved.has_dependents, nullptr);
		return;
	}
	Datum values[7];
	char nulls[8] = "       ";
	values[0] = Int64GetDatum(job_id);
	values[1] = lease;
	nulls[1] = has_lease ? ' ' : 'n';
	values[2] = CStringGetTextDatum(status);
	values[3] = TextOrNull(outcome, &nulls[3]);
	values[4] = TextOrNull(error, &nulls[4]);
	values[5] = result;
	nulls[5] = result_null ? 'n' : ' ';
	/* The common job has no FIFO group and is finished in one statement; a
	 * group member takes its group lock first and is finished again. */
	values[6] = BoolGetDatum(false);
	if (Exec(Stmt::kFinishRunning, values, nulls, SPI_OK_SELECT) == 0) {
		values[6] = BoolGetDatum(true);
		if (!LockGroupOf(job_id) || Exec(Stmt::kFinishRunning, values, nulls, SPI_OK_SELECT) == 0)
			RaiseNotRunning(job_id, lease, has_lease);
	}
	NoteFinished(status);
	AfterFinish(job_id, status, ColBool(0, 1), ColText(0, 2));
}

void
Requeue(int64 job_id, TimestampTz run_after, const char *error, const char *outcome)
{
	Datum values[4];
	char nulls[5] = "    ";
	values[0] = Int64GetDatum(job_id);
	values[1] = TimestampTzGetDatum(run_after);
	values[2] = TextOrNull(error, &nulls[2]);
	values[3] = CStringGetTextDatum(outcome);
	uint64 n = Exec(Stmt::kRequeue, values, nulls, SPI_OK_UPDATE_RETURNING);
	if (n > 0)
		stats::Errored(ColText(0, 1), ColText(0, 2));
	NoteRows(n, ReadyRows::kMaybeDelayed);
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

/* PromoteDue makes delayed jobs whose run_after has passed (by the clock,
 * not the transaction start, so a long poll sees them fall due) runnable. */
uint64
PromoteDue(ArrayType *job_types, ArrayType *queues, int32 limit)
{
	Datum values[4] = {TimestampTzGetDatum(GetCurrentTimestamp()), PointerGetDatum(job_types), PointerGetDatum(queues),
	                   Int32GetDatum(limit)};
	char nulls[5] = {' ', job_types ? ' ' : 'n', queues ? ' ' : 'n', ' ', '\0'};
	uint64 n = Exec(Stmt::kPromoteDue, values, nulls, SPI_OK_UPDATE_RETURNING);
	NoteRows(n, ReadyRows::kReady);
	return n;
}

void
MarkDone(int64 job_id, Datum result, bool result_null, Datum lease, bool has_lease)
{
	FinishRunning(job_id, lease, has_lease, "DONE", "done", nullptr, result, result_null);
}

int32
MarkDoneBatch(ArrayType *job_ids, ArrayType *lease_tokens)
{
	Datum *ids;
	bool *id_nulls;
	int n;
	deconstruct_array(job_ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &ids, &id_nulls, &n);
	Datum *leases = nullptr;
	bool *lease_nulls = nullptr;
	if (lease_tokens) {
		int nleases;
		deconstruct_array(lease_tokens, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &leases, &lease_nulls, &nleases);
		if (nleases != n)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("lease_tokens has %d elements, job_ids %d", nleases, n)));
		for (int i = 0; i < n; i++)
			if (lease_nulls[i])
				ereport(ERROR,
				        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("lease_tokens must not contain nulls")));
	}
	int64 *sorted = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	for (int i = 0; i < n; i++) {
		if (id_nulls[i])
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("job_ids must not contain nulls")));
		sorted[i] = DatumGetInt64(ids[i]);
	}
	qsort(sorted, n, sizeof(int64), CompareIds);
	for (int i = 1; i < n; i++)
		if (sorted[i] == sorted[i - 1])
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("job_ids must not contain duplicates, %lld repeats", (long long)sorted[i])));
	if (n == 0)
		return 0;

	int64 *finished = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	uint64 nfinished = 0;
	IdList with_dependents{static_cast<int64 *>(palloc(sizeof(int64) * (n + 1))), nullptr, 0};
	auto collect = [&](uint64 rows) {
		for (uint64 i = 0; i < rows; i++) {
			NoteFinished("DONE", i);
			finished[nfinished++] = ColInt64(i, 7);
			if (ColBool(i, 1))
				with_dependents.ids[with_dependents.count++] = ColInt64(i, 7);
		}
	};
	/* Jobs whose claims a batch pickup deferred go to job_done at once; any
	 * other deferred claim is written when the next statement starts. */
	auto *moved = static_cast<direct_finish::Moved *>(palloc(sizeof(direct_finish::Moved) * n));
	int nmoved = direct_finish::FinishDeferred(n, ids, leases, moved);
	for (int i = 0; i < nmoved; i++) {
		NoteMoved(moved[i], "DONE");
		finished[nfinished++] = moved[i].id;
		if (moved[i].has_dependents)
			with_dependents.ids[with_dependents.count++] = moved[i].id;
	}
	/* One statement finishes every running job outside a FIFO group. */
	if (nfinished < static_cast<uint64>(n)) {
		Datum values[6] = {PointerGetDatum(job_ids),
		                   PointerGetDatum(lease_tokens),
		                   CStringGetTextDatum("DONE"),
		                   CStringGetTextDatum("done"),
		                   Datum(0),
		                   Datum(0)};
		char nulls[7] = {' ', lease_tokens ? ' ' : 'n', ' ', ' ', 'n', 'n', '\0'};
		collect(Exec(Stmt::kFinishRunningBatch, values, nulls, SPI_OK_SELECT));
	}
	qsort(with_dependents.ids, with_dependents.count, sizeof(int64), CompareIds);
	for (uint64 i = 0; i < with_dependents.count; i++)
		AfterFinish(with_dependents.ids[i], "DONE", true, nullptr);

	/* The rest are FIFO group members (finished under their group lock) or
	 * not running, which raises as mark_done does. */
	qsort(finished, nfinished, sizeof(int64), CompareIds);
	for (int i = 0; nfinished < static_cast<uint64>(n) && i < n; i++) {
		int64 id = DatumGetInt64(ids[i]);
		if (!bsearch(&id, finished, nfinished, sizeof(int64), CompareIds)) {
			FinishRunning(id, leases ? leases[i] : Datum(0), leases != nullptr, "DONE", "done", nullptr, Datum(0),
			              true);
		}
	}
	return n;
}

/* ClipError cuts an error or reason kept in last_error to kMaxErrorChars
 * characters. */
const char *
ClipError(const char *error)
{
	return error ? pnstrdup(error, pg_mbcharcliplen(error, strlen(error), kMaxErrorChars)) : nullptr;
}

const char *
MarkError(int64 job_id, const char *error, bool terminal, Datum lease, bool has_lease, const Interval *retry_after)
{
	error = ClipError(error);
	Datum values[3] = {Int64GetDatum(job_id), lease, BoolGetDatum(false)};
	char nulls[4] = {' ', has_lease ? ' ' : 'n', ' ', '\0'};
	if (Exec(Stmt::kLockRunning, values, nulls, SPI_OK_SELECT) == 0) {
		values[2] = BoolGetDatum(true);
		if (!LockGroupOf(job_id) || Exec(Stmt::kLockRunning, values, nulls, SPI_OK_SELECT) == 0)
			RaiseNotRunning(job_id, lease, has_lease);
	}
	bool isnull;
	int32 attempts = DatumGetInt32(Col(0, 1, &isnull));
	int32 max_attempts = DatumGetInt32(Col(0, 2, &isnull));

	if (terminal || attempts >= max_attempts) {
		FinishRunning(job_id, lease, has_lease, "FAILED", "failed", error, Datum(0), true);
		return "FAILED";
	}
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz run_after =
	    retry_after ? DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(now),
	                                                          PointerGetDatum(retry_after)))
	                : now + backoff::DelayFor(guc::Backoff(), attempts);
	Requeue(job_id, run_after, error, "retry");
	return "READY";
}

void
Heartbeat(int64 job_id, Datum lease, bool has_lease)
{
	Datum values[2] = {Int64GetDatum(job_id), lease};
	char nulls[3] = {' ', has_lease ? ' ' : 'n', '\0'};
	if (Exec(Stmt::kHeartbeat, values, nulls, SPI_OK_UPDATE_RETURNING) == 0)
		RaiseNotRunning(job_id, lease, has_lease);
}

int32
ReapStale(const Interval *default_stale_after)
{
	Datum values[2] = {PointerGetDatum(default_stale_after), Datum(0)};
	uint64 n = Exec(Stmt::kStale, values, nullptr, SPI_OK_SELECT);
	IdList stale = CopyIds(n, true);
	const char *error = "timed out: no heartbeat within the stale window";
	int32 reaped = 0;
	for (uint64 i = 0; i < stale.count; i++) {
		/* Group lock before the row lock; then make sure it is still stale
		 * and not held by a worker finishing it right now. */
		if (stale.labels[i])
			LockFifoGroup(stale.labels[i]);
		Datum lock_values[2] = {Int64GetDatum(stale.ids[i]), PointerGetDatum(default_stale_after)};
		if (Exec(Stmt::kLockStale, lock_values, nullptr, SPI_OK_SELECT) == 0)
			continue;
		if (ColBool(0, 1))
			FinishRunning(stale.ids[i], Datum(0), false, "FAILED", "stale", error, Datum(0), true);
		else
			Requeue(stale.ids[i], GetCurrentTransactionStartTimestamp(), error, "stale");
		reaped++;
	}
	return reaped;
}

bool
Cancel(int64 job_id, const char *reason)
{
	char *status = JobState(job_id);
	if (IsStatus(status, "DONE") || IsStatus(status, "FAILED") || IsStatus(status, "CANCELLED"))
		return false;
	return FinishLive(job_id, "CANCELLED", "cancelled", reason ? ClipError(reason) : "cancelled");
}

bool
Retry(int64 job_id)
{
	char *status = JobState(job_id);
	char *fifo_key = ColText(0, 3);
	Datum values[2] = {Int64GetDatum(job_id), Datum(0)};
	if (!IsStatus(status, "FAILED") && !IsStatus(status, "CANCELLED"))
		return false;
	if (Exec(Stmt::kDedupeHolder, values, nullptr, SPI_OK_SELECT) > 0)
		ereport(ERROR, (errcode(ERRCODE_UNIQUE_VIOLATION),
		                errmsg("job %lld cannot be retried while job %lld holds its dedupe key", (long long)job_id,
		                       (long long)ColInt64(0, 1))));
	bool blocked = false;
	if (fifo_key) {
		LockFifoGroup(fifo_key);
		Datum key[1] = {CStringGetTextDatum(fifo_key)};
		blocked = Exec(Stmt::kFifoBusy, key, nullptr, SPI_OK_SELECT, 1) > 0;
	}
	values[1] = CStringGetTextDatum(blocked ? "BLOCKED" : "READY");
	uint64 n = Exec(Stmt::kRetryFinished, values, nullptr, SPI_OK_INSERT_RETURNING);
	stats::Finished was;
	if (n > 0 && stats::ParseFinished(status, &was))
		stats::FinishedRemoved(ColText(0, 1), ColText(0, 2), was, 1);
	if (!blocked)
		NoteRows(n, ReadyRows::kReady);
	return n > 0;
}

int64
Purge(const Interval *older_than, const char *statuses_literal)
{
	Datum values[2] = {PointerGetDatum(older_than), CStringGetTextDatum(statuses_literal)};
	return NoteRemoved(Exec(Stmt::kPurge, values, nullptr, SPI_OK_SELECT));
}

} // namespace pqrun::queue
