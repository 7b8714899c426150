/* src/jobs/finish.cpp — finishing jobs: mark_done, mark_done_batch, a
 * running attempt's end, and what follows a finish.
 *
 * A job finishes by moving from job_live to job_done (job_row.hpp says what
 * each column becomes). A running job in no FIFO group moves below the
 * executor when finish_direct.hpp can; otherwise, and for jobs that are not
 * running (a cancel), one statement moves it. Then, in the same
 * transaction, its dependents are released (DONE) or cancelled, and the
 * next job of its FIFO group may run.
 */
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"
#include "pg/citus.hpp"

#include "jobs/finish_direct.hpp"
#include "jobs/flow_control.hpp"
#include "jobs/job_row.hpp"
#include "pg/spi_rows.hpp"
#include "shmem/stats.hpp"

#include <algorithm>

namespace pqrun::jobs {

namespace stmts {

/* Move the job_live rows in CTE `gone` to job_done as status $3 with outcome
 * $4 (kept only if the job was running), error $5 (NULL keeps the last one)
 * and result $6; answer what the caller must follow up on. */
#define FINISH_COLUMNS                                                                                                 \
	"id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds, locked_at,"   \
	" locked_by, lease_token, dedupe_key, fifo_key, depends_on, last_error, finished_at, duration_ms, result,"         \
	" created_at, updated_at" PQRUN_JOB_CONTROLS ", outcome"
#define FINISH_VALUES                                                                                                  \
	"id, queue, job_type, payload, $3::pqrun.job_status, priority, attempts, max_attempts, run_after,"                 \
	" timeout_seconds, locked_at, locked_by, lease_token, dedupe_key, fifo_key, depends_on,"                           \
	" COALESCE($5, last_error), pg_catalog.now(), " PQRUN_DURATION_MS                                                  \
	", $6, created_at, pg_catalog.now()" PQRUN_JOB_CONTROLS ", CASE WHEN status = 'RUNNING' THEN $4 END"
static_assert(job_row::FinishIs(FINISH_COLUMNS, FINISH_VALUES), "the finish must fill job_row::kColumns' job_done");
#define FINISH_FROM_GONE                                                                                               \
	", moved AS (INSERT INTO pqrun.job_done (" FINISH_COLUMNS ") SELECT " FINISH_VALUES " FROM gone)"                  \
	" SELECT has_dependents, fifo_key, queue, job_type, status::text, locked_at, id FROM gone"

spi::Statement kFinishRunning{
    "finish running",
    "WITH gone AS (DELETE FROM pqrun.job_live WHERE id = $1 AND status = 'RUNNING'"
    "   AND ($2::uuid IS NULL OR lease_token = $2) AND ($7 OR fifo_key IS NULL) RETURNING *)" FINISH_FROM_GONE,
    7,
    {INT8OID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, BOOLOID}};

/* mark_done_batch: the running jobs of $1 (with the leases $2, in the
 * same order, when given) that belong to no FIFO group (those need their
 * group lock first). */
spi::Statement kFinishRunningBatch{
    "finish running batch",
    "WITH gone AS (DELETE FROM pqrun.job_live j WHERE j.id = ANY ($1) AND j.status = 'RUNNING'"
    "   AND j.fifo_key IS NULL AND ($2 IS NULL OR (j.id, j.lease_token) IN"
    "     (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))))"
    "   RETURNING j.*)" FINISH_FROM_GONE,
    6,
    {INT8ARRAYOID, UUIDARRAYOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}};

spi::Statement kFinishAny{
    "finish any",
    "WITH gone AS (DELETE FROM pqrun.job_live WHERE id = $1 AND $2::uuid IS NULL RETURNING *)" FINISH_FROM_GONE,
    6,
    {INT8OID, UUIDOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID}};

spi::Statement kDropEdgesOf{"drop edges of", "DELETE FROM pqrun.job_dep WHERE job_id = $1", 1, {INT8OID}};

spi::Statement kTakeDependents{
    "take dependents", "DELETE FROM pqrun.job_dep WHERE dep_id = $1 RETURNING job_id", 1, {INT8OID}};

spi::Statement kBlockedFifoKey{
    "blocked fifo key", "SELECT fifo_key FROM pqrun.job_live WHERE id = $1 AND status = 'BLOCKED'", 1, {INT8OID}};

spi::Statement kLockBlocked{
    "lock blocked", "SELECT 1 FROM pqrun.job_live WHERE id = $1 AND status = 'BLOCKED' FOR UPDATE", 1, {INT8OID}};

/* Must run after the row lock of kLockBlocked was granted, so that its
 * snapshot sees what the transactions it waited for committed. */
spi::Statement kReleaseIfFree{"release if free",
                              "UPDATE pqrun.job_live j SET status = 'READY', delayed = j.run_after > pg_catalog.now(),"
                              "   updated_at = pg_catalog.now()"
                              " WHERE j.id = $1 AND j.status = 'BLOCKED'"
                              "   AND NOT EXISTS (SELECT 1 FROM pqrun.job_dep d WHERE d.job_id = j.id)"
                              "   AND (j.fifo_key IS NULL OR NOT EXISTS (SELECT 1 FROM pqrun.job_live o"
                              "        WHERE o.fifo_key = j.fifo_key AND o.id < j.id))"
                              " RETURNING j.queue, j.job_type, j.priority, j.id, j.delayed, j.run_after",
                              1,
                              {INT8OID}};

spi::Statement kFifoHead{
    "fifo head", "SELECT id FROM pqrun.job_live WHERE fifo_key = $1 ORDER BY id LIMIT 1", 1, {TEXTOID}};

} // namespace stmts

using namespace spi;

namespace {

/* A job a finish statement moved to job_done, read from row `row` of its
 * result (has_dependents, fifo_key, queue, job_type, old status, locked_at,
 * id) before the statements after it replace that result. */
struct MovedRow {
	finish_direct::Moved moved;
	char *fifo_key; /* nullptr: none */
};

MovedRow
MovedAt(uint64 row)
{
	bool isnull;
	Datum locked_at = Col(row, 6, &isnull);
	int64 duration_ms = isnull ? 0 : (GetCurrentTransactionStartTimestamp() - DatumGetTimestampTz(locked_at)) / 1000;
	return MovedRow{{ColInt64(row, 7), ColBool(row, 1), ColText(row, 3), ColText(row, 4), duration_ms}, ColText(row, 2)};
}

/* NoteMoved counts a job moved to job_done as `status`, by finish_direct
 * or by a statement (MovedAt). */
void
NoteMoved(const finish_direct::Moved &moved, JobStatus status)
{
	stats::Finished finished;
	if (stats::FinishedOf(status, &finished)) {
		stats::JobFinished(moved.queue, moved.job_type, finished, moved.duration_ms);
		flow_control::NoteEnded(moved.queue, moved.job_type, moved.id);
	}
}

void
AdvanceFifo(const char *fifo_key)
{
	LockFifoGroup(fifo_key);
	Datum values[1] = {CStringGetTextDatum(fifo_key)};
	if (Exec(stmts::kFifoHead, values, nullptr, SPI_OK_SELECT) > 0)
		Unblock(ColInt64(0, 1));
}

} // namespace

/* FinishLive moves unfinished job `job_id` to job_done as `status`, whatever
 * its state, then follows up. Answers false if it was not unfinished. */
bool
FinishLive(int64 job_id, JobStatus status, const char *outcome, const char *error)
{
	LockGroupOf(job_id);
	Datum edge_values[1] = {Int64GetDatum(job_id)};
	Exec(stmts::kDropEdgesOf, edge_values, nullptr, SPI_OK_DELETE);
	Datum values[6];
	char nulls[7] = "      ";
	values[0] = Int64GetDatum(job_id);
	nulls[1] = 'n';
	values[1] = Datum(0);
	values[2] = CStringGetTextDatum(StatusName(status));
	values[3] = TextOrNull(outcome, &nulls[3]);
	values[4] = TextOrNull(error, &nulls[4]);
	nulls[5] = 'n';
	values[5] = Datum(0);
	if (Exec(stmts::kFinishAny, values, nulls, SPI_OK_SELECT) == 0)
		return false;
	MovedRow row = MovedAt(0);
	NoteMoved(row.moved, status);
	AfterFinish(job_id, status, row.moved.has_dependents, row.fifo_key);
	return true;
}

/* Unblock makes BLOCKED job `job_id` READY if it has no pending dependency
 * and heads its FIFO group. Answers whether it did. */
bool
Unblock(int64 job_id)
{
	Datum values[1] = {Int64GetDatum(job_id)};
	if (Exec(stmts::kBlockedFifoKey, values, nullptr, SPI_OK_SELECT) == 0)
		return false;
	char *fifo_key = ColText(0, 1);
	if (fifo_key)
		LockFifoGroup(fifo_key);
	if (Exec(stmts::kLockBlocked, values, nullptr, SPI_OK_SELECT) == 0)
		return false;
	uint64 n = Exec(stmts::kReleaseIfFree, values, nullptr, SPI_OK_UPDATE_RETURNING);
	NoteRows(n, ReadyRows::kMaybeDelayed);
	return n > 0;
}

/* AfterFinish releases or cancels the dependents of a job that just finished
 * with `status` and lets the next job of its FIFO group run. */
void
AfterFinish(int64 job_id, JobStatus status, bool has_dependents, const char *fifo_key)
{
	check_stack_depth();
	if (has_dependents) {
		Datum values[1] = {Int64GetDatum(job_id)};
		IdList dependents = CopyIds(Exec(stmts::kTakeDependents, values, nullptr, SPI_OK_DELETE_RETURNING), false);
		qsort(dependents.ids, dependents.count, sizeof(int64), CompareIds);
		bool done = status == JobStatus::kDone;
		char *reason = done ? nullptr : psprintf("dependency %lld ended %s", (long long)job_id, StatusName(status));
		for (uint64 i = 0; i < dependents.count; i++) {
			if (done)
				Unblock(dependents.ids[i]);
			else
				FinishLive(dependents.ids[i], JobStatus::kCancelled, "cancelled", reason);
		}
	}
	if (fifo_key)
		AdvanceFifo(fifo_key);
}

/* FinishRunning ends the running attempt of `job_id` (fenced by the lease
 * when given) with `status`; raises if the job is not running. */
void
FinishRunning(int64 job_id, Datum lease, bool has_lease, JobStatus status, const char *outcome, const char *error,
              Datum result, bool result_null)
{
	finish_direct::Moved moved;
	if (finish_direct::FinishRunning(job_id, has_lease ? DatumGetUUIDP(lease) : nullptr,
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
	values[2] = CStringGetTextDatum(StatusName(status));
	values[3] = TextOrNull(outcome, &nulls[3]);
	values[4] = TextOrNull(error, &nulls[4]);
	values[5] = result;
	nulls[5] = result_null ? 'n' : ' ';
	/* The common job has no FIFO group and is finished in one statement; a
	 * group member takes its group lock first and is finished again. */
	values[6] = BoolGetDatum(false);
	if (Exec(stmts::kFinishRunning, values, nulls, SPI_OK_SELECT) == 0) {
		values[6] = BoolGetDatum(true);
		if (!LockGroupOf(job_id) || Exec(stmts::kFinishRunning, values, nulls, SPI_OK_SELECT) == 0)
			RaiseNotRunning(job_id, lease, has_lease);
	}
	MovedRow row = MovedAt(0);
	NoteMoved(row.moved, status);
	AfterFinish(job_id, status, row.moved.has_dependents, row.fifo_key);
}

void
MarkDone(int64 job_id, Datum result, bool result_null, Datum lease, bool has_lease)
{
	citus::EnterJob(job_id);
	FinishRunning(job_id, lease, has_lease, JobStatus::kDone, "done", nullptr, result, result_null);
}

namespace {

/* DoneList is the jobs of a mark_done_batch or a finish-and-claim: ids and
 * lease tokens (nullptr: unfenced) as the caller gave them, and their
 * positions in id order. */
struct DoneList {
	Datum *ids;
	Datum *leases;
	int *order;
	int64 *sorted; /* ids[order[k]] */
	int n;
};

/* ReadDoneList takes job_ids and lease_tokens apart, refusing (22023)
 * nulls, duplicates and a lease_tokens of another length. */
DoneList
ReadDoneList(ArrayType *job_ids, ArrayType *lease_tokens)
{
	DoneList list{nullptr, nullptr, nullptr, nullptr, 0};
	bool *id_nulls;
	deconstruct_array(job_ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &list.ids, &id_nulls, &list.n);
	int n = list.n;
	if (lease_tokens) {
		int nleases;
		bool *lease_nulls;
		deconstruct_array(lease_tokens, UUIDOID, UUID_LEN, false, TYPALIGN_CHAR, &list.leases, &lease_nulls, &nleases);
		if (nleases != n)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("lease_tokens has %d elements, job_ids %d", nleases, n)));
		for (int i = 0; i < n; i++)
			if (lease_nulls[i])
				ereport(ERROR,
				        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("lease_tokens must not contain nulls")));
	}
	for (int i = 0; i < n; i++)
		if (id_nulls[i])
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("job_ids must not contain nulls")));
	list.order = static_cast<int *>(palloc(sizeof(int) * (n + 1)));
	for (int i = 0; i < n; i++)
		list.order[i] = i;
	std::sort(list.order, list.order + n,
	          [&](int a, int b) { return DatumGetInt64(list.ids[a]) < DatumGetInt64(list.ids[b]); });
	list.sorted = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	for (int k = 0; k < n; k++) {
		list.sorted[k] = DatumGetInt64(list.ids[list.order[k]]);
		if (k > 0 && list.sorted[k] == list.sorted[k - 1])
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("job_ids must not contain duplicates, %lld repeats", (long long)list.sorted[k])));
	}
	return list;
}

} // namespace

int32
MarkDoneBatch(ArrayType *job_ids, ArrayType *lease_tokens)
{
	DoneList list = ReadDoneList(job_ids, lease_tokens);
	Datum *ids = list.ids;
	Datum *leases = list.leases;
	int n = list.n;
	if (n == 0)
		return 0;
	citus::EnterJob(DatumGetInt64(ids[0]));

	int64 *finished = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	uint64 nfinished = 0;
	IdList with_dependents{static_cast<int64 *>(palloc(sizeof(int64) * (n + 1))), nullptr, 0};
	auto note = [&](int64 id, bool has_dependents) {
		finished[nfinished++] = id;
		if (has_dependents)
			with_dependents.ids[with_dependents.count++] = id;
	};
	/* Jobs whose claims a batch pickup deferred go to job_done at once; any
	 * other deferred claim is written when the next statement starts. */
	auto *moved = static_cast<finish_direct::Moved *>(palloc(sizeof(finish_direct::Moved) * n));
	int nmoved = finish_direct::FinishDeferred(n, ids, leases, moved);
	for (int i = 0; i < nmoved; i++) {
		NoteMoved(moved[i], JobStatus::kDone);
		note(moved[i].id, moved[i].has_dependents);
	}
	/* The others, in id order, as by mark_done (finish_direct.hpp). */
	auto rest = [&](int64 *rest_ids, int *rest_at) {
		if (nfinished == static_cast<uint64>(n))
			return 0; /* the usual case: nothing left to look for */
		qsort(finished, nfinished, sizeof(int64), CompareIds);
		int nrest = 0;
		for (int k = 0; k < n; k++) {
			int64 id = list.sorted[k];
			if (!bsearch(&id, finished, nfinished, sizeof(int64), CompareIds)) {
				rest_at[nrest] = list.order[k];
				rest_ids[nrest++] = id;
			}
		}
		return nrest;
	};
	auto *rest_ids = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	auto *rest_at = static_cast<int *>(palloc(sizeof(int) * (n + 1)));
	int nrest = rest(rest_ids, rest_at);
	if (nrest > 0) {
		auto **rest_leases = static_cast<const pg_uuid_t **>(palloc(sizeof(pg_uuid_t *) * nrest));
		for (int k = 0; k < nrest; k++)
			rest_leases[k] = leases ? DatumGetUUIDP(leases[rest_at[k]]) : nullptr;
		nmoved = finish_direct::FinishRunningEach(nrest, rest_ids, rest_leases,
		                                          {JobStatus::kDone, "done", nullptr, Datum(0), true}, moved);
		for (int i = 0; i < nmoved; i++) {
			NoteMoved(moved[i], JobStatus::kDone);
			note(moved[i].id, moved[i].has_dependents);
		}
		if (nmoved < 0) {
			/* The tables need the executor: one statement finishes every
			 * running job outside a FIFO group. */
			Datum values[6] = {PointerGetDatum(job_ids),
			                   PointerGetDatum(lease_tokens),
			                   CStringGetTextDatum(StatusName(JobStatus::kDone)),
			                   CStringGetTextDatum("done"),
			                   Datum(0),
			                   Datum(0)};
			char nulls[7] = {' ', lease_tokens ? ' ' : 'n', ' ', ' ', 'n', 'n', '\0'};
			uint64 rows = Exec(stmts::kFinishRunningBatch, values, nulls, SPI_OK_SELECT);
			for (uint64 i = 0; i < rows; i++) {
				finish_direct::Moved moved = MovedAt(i).moved;
				NoteMoved(moved, JobStatus::kDone);
				note(moved.id, moved.has_dependents);
			}
		}
		nrest = rest(rest_ids, rest_at);
	}
	qsort(with_dependents.ids, with_dependents.count, sizeof(int64), CompareIds);
	for (uint64 i = 0; i < with_dependents.count; i++)
		AfterFinish(with_dependents.ids[i], JobStatus::kDone, true, nullptr);

	/* The rest are FIFO group members (finished under their group locks,
	 * all taken first) or not running, which raises as mark_done does. */
	LockGroupsOf(rest_ids, nrest);
	for (int k = 0; k < nrest; k++) {
		int i = rest_at[k];
		FinishRunning(rest_ids[k], leases ? leases[i] : Datum(0), leases != nullptr, JobStatus::kDone, "done", nullptr,
		              Datum(0), true);
	}
	return n;
}

int32
MarkDoneEach(ArrayType *job_ids, ArrayType *lease_tokens, ArrayType *results)
{
	if (results == nullptr && ArrayGetNItems(ARR_NDIM(job_ids), ARR_DIMS(job_ids)) > 1)
		return MarkDoneBatch(job_ids, lease_tokens);
	DoneList list = ReadDoneList(job_ids, lease_tokens);
	Datum *values = nullptr;
	bool *nulls = nullptr;
	if (results) {
		int nresults;
		deconstruct_array(results, JSONBOID, -1, false, TYPALIGN_INT, &values, &nulls, &nresults);
		if (nresults != list.n)
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			                errmsg("results has %d elements, job_ids %d", nresults, list.n)));
	}
	/* Their groups first, then the rows in id order, as every transaction
	 * that locks several jobs' rows. */
	LockGroupsOf(list.sorted, list.n);
	for (int k = 0; k < list.n; k++) {
		int i = list.order[k];
		MarkDone(list.sorted[k], values ? values[i] : Datum(0), values ? nulls[i] : true,
		         list.leases ? list.leases[i] : Datum(0), list.leases != nullptr);
	}
	return list.n;
}

} // namespace pqrun::jobs
