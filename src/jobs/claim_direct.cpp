/* src/jobs/claim_direct.cpp — claims written below the executor. */
#include "jobs/claim_direct.hpp"

#include "jobs/direct_rows.hpp"
#include "jobs/job_row.hpp"

namespace pqrun::claim_direct {

namespace {

using namespace direct_rows;

using job_row::Claimed;

/* The job_live columns a claim writes (job_row.hpp), with what it writes
 * to each. */
struct Columns {
	AttrNumber id, status, attempts;
	int set[job_row::kCount];
	Claimed claimed[job_row::kCount];
	int nset;
	Oid ready, running;
};

Columns
FindColumns(const Layout &live)
{
	Columns c;
	c.id = live.at[job_row::kId];
	c.status = live.at[job_row::kStatus];
	c.attempts = live.at[job_row::kAttempts];
	c.nset = 0;
	for (int i = 0; i < job_row::kCount; i++) {
		if (job_row::kColumns[i].claim == Claimed::kKeep)
			continue;
		c.set[c.nset] = live.at[i];
		c.claimed[c.nset++] = job_row::kColumns[i].claim;
	}
	c.ready = live.ready;
	c.running = live.running;
	return c;
}

/* ClaimRow stores in `new_slot` the RUNNING version, as the SQL path's
 * UPDATE sets it, of the READY row in `old_slot` (claim `i`). */
void
ClaimRow(const Columns &c, const Claims &claims, int i, TimestampTz at, Datum worker, TupleTableSlot *old_slot,
         TupleTableSlot *new_slot)
{
	bool isnull;
	int64 id = DatumGetInt64(slot_getattr(old_slot, c.id, &isnull));
	Oid status = DatumGetObjectId(slot_getattr(old_slot, c.status, &isnull));
	int32 attempts = DatumGetInt32(slot_getattr(old_slot, c.attempts, &isnull));
	if (id != claims.ids[i] || status != c.ready)
		elog(ERROR, "pqrun: the deferred claim of job %lld does not match its row", (long long)claims.ids[i]);
	Datum values[job_row::kCount];
	bool nulls[job_row::kCount];
	for (int s = 0; s < c.nset; s++) {
		nulls[s] = false;
		switch (c.claimed[s]) {
		case Claimed::kKeep:
		case Claimed::kNull:
			values[s] = Datum(0);
			nulls[s] = true;
			break;
		case Claimed::kRunning:
			values[s] = ObjectIdGetDatum(c.running);
			break;
		case Claimed::kFalse:
			values[s] = BoolGetDatum(false);
			break;
		case Claimed::kNextAttempt:
			values[s] = Int32GetDatum(attempts + 1);
			break;
		case Claimed::kAt:
			values[s] = TimestampTzGetDatum(at);
			break;
		case Claimed::kWorker:
			values[s] = worker;
			break;
		case Claimed::kToken:
			values[s] = UUIDPGetDatum(const_cast<pg_uuid_t *>(&claims.tokens[i]));
			break;
		case Claimed::kPid:
			values[s] = Int32GetDatum(MyProcPid);
			nulls[s] = !claims.by_session;
			break;
		case Claimed::kSessionStart:
			values[s] = TimestampTzGetDatum(MyStartTimestamp);
			nulls[s] = !claims.by_session;
			break;
		}
	}
	HeapTuple old_tuple = ExecFetchSlotHeapTuple(old_slot, false, nullptr);
	HeapTuple claimed = heap_modify_tuple_by_cols(old_tuple, old_slot->tts_tupleDescriptor, c.nset,
	                                              const_cast<int *>(c.set), values, nulls);
	ExecStoreHeapTuple(claimed, new_slot, true);
}

} // namespace

bool
Write(const Claims &claims, TimestampTz at, const char *worker, Oid namespace_id)
{
	Tables tables;
	if (!GoDirect(namespace_id, RowExclusiveLock, &tables, false))
		return false;
	Relation live = tables.live;
	Columns columns = FindColumns(tables.live_layout);
	RowWriter writer(live);
	TupleTableSlot *old_slot = table_slot_create(live, nullptr);
	TupleTableSlot *new_slot = MakeSingleTupleTableSlot(RelationGetDescr(live), &TTSOpsHeapTuple);
	Datum worker_text = CStringGetTextDatum(worker);
	CommandId cid = GetCurrentCommandId(true);
	for (int i = 0; i < claims.count; i++) {
		ItemPointerData tid = claims.ctids[i];
		/* The row is locked by this transaction: SnapshotSelf sees it. */
		if (!table_tuple_fetch_row_version(live, &tid, SnapshotSelf, old_slot))
			elog(ERROR, "pqrun: the deferred claim of job %lld lost its row", (long long)claims.ids[i]);
		ClaimRow(columns, claims, i, at, worker_text, old_slot, new_slot);
		ExecClearTuple(old_slot);
		if (live->rd_att->constr)
			ExecConstraints(writer.info, new_slot, writer.estate);
		TM_FailureData tmfd;
		compat::IndexUpdate index_update;
		TM_Result result = compat::TupleUpdate(live, &tid, new_slot, cid, &tmfd, &index_update);
		/* Nobody else can change a row this transaction holds locked. */
		if (result != TM_Ok)
			elog(ERROR, "pqrun: the deferred claim of job %lld could not be written (%d)", (long long)claims.ids[i],
			     static_cast<int>(result));
		if (index_update.needed)
			list_free(
			    compat::InsertIndexTuples(writer.info, new_slot, writer.estate, true, index_update.only_summarizing));
		ExecClearTuple(new_slot);
		ResetPerTupleExprContext(writer.estate);
	}
	ExecDropSingleTupleTableSlot(new_slot);
	ExecDropSingleTupleTableSlot(old_slot);
	writer.Close();
	tables.Close();
	return true;
}

} // namespace pqrun::claim_direct
