/* src/jobs/finish_direct.cpp — jobs finished below the executor. */
#include "jobs/finish_direct.hpp"

#include "jobs/direct_rows.hpp"
#include "jobs/job_row.hpp"
#include "xact/deferred_claims.hpp"

#include <cmath>

namespace pqrun::finish_direct {

namespace {

using namespace direct_rows;

using job_row::Finished;

/* Which of job_row.hpp's finishes: of a deferred claim (its attempt's
 * columns come from the claim, which was never written) or of a RUNNING
 * row (only what ending it changes). */
using Finish = Finished job_row::Column::*;
constexpr Finish kFromClaim = &job_row::Column::from_claim;
constexpr Finish kFromRunning = &job_row::Column::from_running;

constexpr int kSources = static_cast<int>(Finished::kCount);

/* Supplied holds what one finish writes for each source of job_row.hpp, as
 * `supply(source, &value, &isnull)` answers: each finish's supply is a
 * switch over every source, so a source job_row.hpp gains is a warning
 * (-Wswitch; an error in the test builds) until each finish says what it
 * is. */
struct Supplied {
	Datum value[kSources];
	bool null[kSources];

	template <typename Supply> explicit Supplied(Supply supply)
	{
		for (int s = 0; s < kSources; s++) {
			value[s] = Datum(0);
			null[s] = false;
			supply(static_cast<Finished>(s), &value[s], &null[s]);
		}
	}
};

/* Rows moved per multi-row insert, as COPY buffers them. */
constexpr int kMaxChunk = 1000;

/* The SQL path's duration_ms (job_row.hpp's PQRUN_DURATION_MS) computed
 * the same way: the interval is justified into days and microseconds, the
 * cast rounds half to even. */
int32
DurationMs(TimestampTz from, TimestampTz now)
{
	int64 us = now - from;
	int64 days = us / USECS_PER_DAY;
	double ms =
	    (static_cast<double>(us - days * USECS_PER_DAY) / 1000000.0 + static_cast<double>(days * SECS_PER_DAY)) *
	    1000.0;
	ms = Max(ms, 0.0);
	return static_cast<int32>(std::rint(Min(ms, 2147483647.0)));
}

/* The job_done row source, per attribute, and job_live's layout. */
struct FinishLayout {
	int natts;
	Finished *source;
	AttrNumber *live_attnum; /* for Finished::kKeep */
	direct_rows::Layout live; /* job_live's, with job_status's labels */
};

/* MakeLayout derives a finish's layout from the tables' (GoDirect saw every
 * column of job_done in job_row.hpp). A column an update added to both
 * tables may be missing from job_live alone only by an operator's hand:
 * then it is null. */
FinishLayout
MakeLayout(const Tables &tables, Finish finish)
{
	const direct_rows::Layout &live = tables.live_layout, &done = tables.done_layout;
	FinishLayout layout;
	layout.natts = RelationGetDescr(tables.done)->natts;
	layout.source = static_cast<Finished *>(palloc(sizeof(Finished) * layout.natts));
	layout.live_attnum = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * layout.natts));
	for (int a = 0; a < layout.natts; a++)
		layout.source[a] = Finished::kKeep; /* a dropped column: null */
	for (int c = 0; c < job_row::kCount; c++) {
		if (done.at[c] == InvalidAttrNumber)
			continue;
		int a = done.at[c] - 1;
		layout.source[a] = job_row::kColumns[c].*finish;
		if (layout.source[a] == Finished::kKeep)
			layout.live_attnum[a] = live.at[c];
	}
	layout.live = live;
	return layout;
}

/* FillDone stores in `done_slot` the history row of the live row in
 * `live_slot`, with `supplied` for the overridden columns, as a copy that
 * outlives the live row's buffer. Dropped columns stay null. */
void
FillDone(const FinishLayout &layout, const Supplied &supplied, TupleTableSlot *live_slot, TupleTableSlot *done_slot)
{
	const Datum *lv = live_slot->tts_values;
	const bool *ln = live_slot->tts_isnull;
	ExecClearTuple(done_slot);
	Datum *values = done_slot->tts_values;
	bool *nulls = done_slot->tts_isnull;
	for (int a = 0; a < layout.natts; a++) {
		if (layout.source[a] == Finished::kKeep) {
			AttrNumber live_att = layout.live_attnum[a];
			values[a] = live_att ? lv[live_att - 1] : Datum(0);
			nulls[a] = live_att ? ln[live_att - 1] : true;
		} else {
			values[a] = supplied.value[static_cast<int>(layout.source[a])];
			nulls[a] = supplied.null[static_cast<int>(layout.source[a])];
		}
	}
	ExecStoreVirtualTuple(done_slot);
	ExecMaterializeSlot(done_slot);
}

/* Describe fills `out` for the caller's statistics from the live row. */
void
Describe(const FinishLayout &layout, TupleTableSlot *live_slot, TimestampTz claimed_at, Moved *out)
{
	const Datum *lv = live_slot->tts_values;
	out->id = DatumGetInt64(lv[layout.live.at[job_row::kId] - 1]);
	out->has_dependents = DatumGetBool(lv[layout.live.at[job_row::kHasDependents] - 1]);
	out->queue = TextDatumGetCString(lv[layout.live.at[job_row::kQueue] - 1]);
	out->job_type = TextDatumGetCString(lv[layout.live.at[job_row::kJobType] - 1]);
	out->duration_ms = (GetCurrentTransactionStartTimestamp() - claimed_at) / 1000;
}

/* BuildDone stores in `done_slot` the DONE attempt of the READY row in
 * `live_slot` (claim i of `taken`) and fills `out`; `outcome` is 'done'. */
void
BuildDone(const FinishLayout &layout, const deferred_claims::Taken &taken, int i, Datum outcome,
          TupleTableSlot *live_slot, TupleTableSlot *done_slot, Moved *out)
{
	const Datum *lv = live_slot->tts_values;
	const bool *ln = live_slot->tts_isnull;
	int64 id = taken.claims.ids[i];
	if (DatumGetInt64(lv[layout.live.at[job_row::kId] - 1]) != id ||
	    DatumGetObjectId(lv[layout.live.at[job_row::kStatus] - 1]) != layout.live.ready ||
	    !ln[layout.live.at[job_row::kFifoKey] - 1])
		elog(ERROR, "pqrun: the deferred claim of job %lld does not match its row", (long long)id);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	int32 attempt = DatumGetInt32(lv[layout.live.at[job_row::kAttempts] - 1]) + 1;
	Supplied supplied([&](Finished source, Datum *value, bool *isnull) {
		switch (source) {
		case Finished::kStatus:
			*value = ObjectIdGetDatum(layout.live.done);
			break;
		case Finished::kAttempts:
			*value = Int32GetDatum(attempt);
			break;
		case Finished::kDuration:
			*value = Int32GetDatum(DurationMs(taken.at, now));
			break;
		case Finished::kLockedAt:
			*value = TimestampTzGetDatum(taken.at);
			break;
		case Finished::kNow:
			*value = TimestampTzGetDatum(now);
			break;
		case Finished::kToken:
			*value = UUIDPGetDatum(&taken.claims.tokens[i]);
			break;
		case Finished::kWorker:
			*value = taken.worker;
			break;
		case Finished::kOutcome:
			*value = outcome;
			break;
		case Finished::kResult: /* mark_done_batch gives none */
		case Finished::kError:  /* not a claim's source: it keeps last_error */
		case Finished::kKeep:   /* the live row's own column (FillDone) */
		case Finished::kCount:
			*isnull = true;
			break;
		}
	});
	FillDone(layout, supplied, live_slot, done_slot);
	Describe(layout, live_slot, taken.at, out);
}

/* MoveChunk moves claims [first, first + n) of `taken`: each DONE attempt
 * is checked against job_done's constraints, all go in with one multi-row
 * insert (as COPY does), then each gets its index entries, and only then
 * are the live rows deleted. */
void
MoveChunk(const FinishLayout &layout, const deferred_claims::Taken &taken, int first, int n, Relation live,
          TupleTableSlot *live_slot, ResultRelInfo *done_info, EState *estate, TupleTableSlot **done_slots, Moved *out)
{
	Relation done = done_info->ri_RelationDesc;
	Datum outcome = CStringGetTextDatum("done");
	for (int j = 0; j < n; j++) {
		ItemPointerData tid = taken.claims.ctids[first + j];
		/* The row is locked by this subtransaction: SnapshotSelf sees it
		 * unless this transaction deleted or updated it since. */
		if (!table_tuple_fetch_row_version(live, &tid, SnapshotSelf, live_slot))
			elog(ERROR, "pqrun: the deferred claim of job %lld lost its row", (long long)taken.claims.ids[first + j]);
		slot_getallattrs(live_slot);
		BuildDone(layout, taken, first + j, outcome, live_slot, done_slots[j], &out[first + j]);
		ExecClearTuple(live_slot);
		if (done->rd_att->constr)
			ExecConstraints(done_info, done_slots[j], estate);
		ResetPerTupleExprContext(estate);
	}
	table_multi_insert(done, done_slots, n, GetCurrentCommandId(true), 0, nullptr);
	for (int j = 0; j < n; j++) {
		list_free(compat::InsertIndexTuples(done_info, done_slots[j], estate));
		ResetPerTupleExprContext(estate);
		ExecClearTuple(done_slots[j]);
	}
	for (int j = 0; j < n; j++)
		simple_heap_delete(live, &taken.claims.ctids[first + j]);
}

/* LiveIdIndex opens job_live's primary key if it is the plain index on id
 * this path assumes, else answers nullptr. */
Relation
LiveIdIndex(Relation live, AttrNumber live_id)
{
	Oid index_id = compat::PrimaryKeyIndex(live);
	if (!OidIsValid(index_id))
		return nullptr;
	Relation index = index_open(index_id, RowExclusiveLock);
	if (index->rd_rel->relam == BTREE_AM_OID && IndexRelationGetNumberOfKeyAttributes(index) == 1 &&
	    index->rd_index->indkey.values[0] == live_id && index->rd_opfamily[0] == INTEGER_BTREE_FAM_OID &&
	    index->rd_opcintype[0] == INT8OID)
		return index;
	index_close(index, NoLock);
	return nullptr;
}

/* FindLatest fetches into `slot` the newest version of job `job_id`'s live
 * row, as logical replication finds the rows it changes: a dirty snapshot
 * sees committed and in-progress versions, and a version some other
 * transaction is inserting or changing is waited for. Answers false if the
 * job has no live row. */
bool
FindLatest(Relation live, Relation index, int64 job_id, TupleTableSlot *slot)
{
	ScanKeyData key;
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(job_id));
	SnapshotData dirty;
	InitDirtySnapshot(dirty);
	IndexScanDesc scan = compat::IndexBeginScan(live, index, &dirty, 1);
	bool found;
	for (;;) {
		index_rescan(scan, &key, 1, nullptr, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		if (!found)
			break;
		ExecMaterializeSlot(slot);
		TransactionId xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			break;
		XactLockTableWait(xwait, nullptr, nullptr, XLTW_None);
	}
	index_endscan(scan);
	return found;
}

/* EndAttempt moves the attempt of running job `job_id` (holding `lease`
 * when given) to job_done as `ending` says. Answers false, having written
 * nothing, when the job is not running, holds another lease or is in a FIFO
 * group: the SQL path then raises or takes the group lock. */
bool
EndAttempt(const Tables &tables, Relation index, const FinishLayout &layout, int64 job_id, const pg_uuid_t *lease,
           const Ending &ending, TupleTableSlot *live_slot, const RowWriter &writer, TupleTableSlot *done_slot,
           Moved *out)
{
	const Datum *lv = live_slot->tts_values;
	const bool *ln = live_slot->tts_isnull;
	for (;;) {
		if (!FindLatest(tables.live, index, job_id, live_slot))
			return false;
		slot_getallattrs(live_slot);
		if (DatumGetObjectId(lv[layout.live.at[job_row::kStatus] - 1]) != layout.live.running ||
		    !ln[layout.live.at[job_row::kFifoKey] - 1])
			return false;
		if (lease && (ln[layout.live.at[job_row::kLeaseToken] - 1] ||
		              memcmp(DatumGetUUIDP(lv[layout.live.at[job_row::kLeaseToken] - 1]), lease, UUID_LEN) != 0))
			return false;
		TM_FailureData tmfd;
		TM_Result result = table_tuple_delete(tables.live, &live_slot->tts_tid, GetCurrentCommandId(true),
		                                      InvalidSnapshot, InvalidSnapshot, true, &tmfd, false);
		if (result == TM_Ok)
			break;
		/* Changed or gone since it was found: look again. */
		if (result != TM_Updated && result != TM_Deleted)
			return false;
	}

	/* The row's TOASTed values stay readable by this transaction after the
	 * delete, so the history row may be built from them now. */
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	bool no_lock_time = ln[layout.live.at[job_row::kLockedAt] - 1];
	TimestampTz locked_at = no_lock_time ? now : DatumGetTimestampTz(lv[layout.live.at[job_row::kLockedAt] - 1]);
	Supplied supplied([&](Finished source, Datum *value, bool *isnull) {
		switch (source) {
		case Finished::kStatus:
			*value = ObjectIdGetDatum(EnumLabel(layout.live.status_type, ending.status));
			break;
		case Finished::kDuration:
			*value = Int32GetDatum(DurationMs(locked_at, now));
			*isnull = no_lock_time;
			break;
		case Finished::kNow:
			*value = TimestampTzGetDatum(now);
			break;
		case Finished::kOutcome:
			*value = CStringGetTextDatum(ending.outcome);
			break;
		case Finished::kError:
			*value = ending.error ? CStringGetTextDatum(ending.error) : lv[layout.live.at[job_row::kLastError] - 1];
			*isnull = ending.error ? false : ln[layout.live.at[job_row::kLastError] - 1];
			break;
		case Finished::kResult:
			*value = ending.result;
			*isnull = ending.result_null;
			break;
		case Finished::kAttempts: /* not a running row's sources: */
		case Finished::kLockedAt: /* it keeps what its claim wrote */
		case Finished::kToken:
		case Finished::kWorker:
		case Finished::kKeep: /* the live row's own column (FillDone) */
		case Finished::kCount:
			*isnull = true;
			break;
		}
	});
	FillDone(layout, supplied, live_slot, done_slot);
	Describe(layout, live_slot, locked_at, out);
	if (tables.done->rd_att->constr)
		ExecConstraints(writer.info, done_slot, writer.estate);
	table_tuple_insert(tables.done, done_slot, GetCurrentCommandId(true), 0, nullptr);
	list_free(compat::InsertIndexTuples(writer.info, done_slot, writer.estate));
	ResetPerTupleExprContext(writer.estate);
	ExecClearTuple(done_slot);
	return true;
}

} // namespace

int
FinishDeferred(int n, const Datum *ids, const Datum *leases, Moved *out)
{
	Oid namespace_id = deferred_claims::FinishableIn();
	Tables tables;
	if (!OidIsValid(namespace_id) || !GoDirect(namespace_id, RowExclusiveLock, &tables, true))
		return 0;
	deferred_claims::Taken taken = deferred_claims::TakeForFinish(n, ids, leases);
	int count = taken.claims.count;
	if (count > 0) {
		FinishLayout layout = MakeLayout(tables, kFromClaim);
		RowWriter writer(tables.done);
		TupleTableSlot *live_slot = table_slot_create(tables.live, nullptr);
		int chunk = Min(count, kMaxChunk);
		auto **done_slots = static_cast<TupleTableSlot **>(palloc(sizeof(TupleTableSlot *) * chunk));
		for (int j = 0; j < chunk; j++)
			done_slots[j] = table_slot_create(tables.done, nullptr);
		for (int first = 0; first < count; first += chunk)
			MoveChunk(layout, taken, first, Min(chunk, count - first), tables.live, live_slot, writer.info,
			          writer.estate, done_slots, out);
		for (int j = 0; j < chunk; j++)
			ExecDropSingleTupleTableSlot(done_slots[j]);
		ExecDropSingleTupleTableSlot(live_slot);
		writer.Close();
	}
	tables.Close();
	return count;
}

bool
FinishRunning(int64 job_id, const pg_uuid_t *lease, const Ending &ending, Moved *out)
{
	return FinishRunningEach(1, &job_id, &lease, ending, out) == 1;
}

int
FinishRunningEach(int n, const int64 *ids, const pg_uuid_t *const *leases, const Ending &ending, Moved *out)
{
	Tables tables;
	if (!GoDirect(get_namespace_oid("pqrun", true), RowExclusiveLock, &tables, true))
		return -1;
	/* This path reads below the executor hook that writes deferred claims
	 * before a query looks at the queue: the jobs may be among them. */
	deferred_claims::WriteAll();
	FinishLayout layout = MakeLayout(tables, kFromRunning);
	Relation index = LiveIdIndex(tables.live, layout.live.at[job_row::kId]);
	int count = index ? 0 : -1;
	if (index) {
		TupleTableSlot *live_slot = table_slot_create(tables.live, nullptr);
		TupleTableSlot *done_slot = table_slot_create(tables.done, nullptr);
		RowWriter writer(tables.done);
		for (int i = 0; i < n; i++)
			if (EndAttempt(tables, index, layout, ids[i], leases[i], ending, live_slot, writer, done_slot, &out[count]))
				count++;
		writer.Close();
		ExecDropSingleTupleTableSlot(done_slot);
		ExecDropSingleTupleTableSlot(live_slot);
		index_close(index, NoLock);
	}
	tables.Close();
	return count;
}

} // namespace pqrun::finish_direct
