/* src/direct_claim.cpp — claims written below the executor. */
#include "direct_claim.hpp"

#include "direct_rows.hpp"

namespace pqrun::direct_claim {

namespace {

using namespace direct_rows;

/* What a claim sets, in job_live column names; ClaimRow gives the values in
 * this order. The last, holder_started, came with 0.5.0: until ALTER
 * EXTENSION UPDATE adds it, claims set the others only. */
constexpr int kSet = 10;
constexpr const char *kSetColumns[kSet] = {"status",      "delayed",      "attempts",   "locked_at",  "locked_by",
                                           "lease_token", "heartbeat_at", "holder_pid", "updated_at", "holder_started"};

/* The job_live columns a claim reads and sets (the first `nset` of kSet). */
struct Columns {
	AttrNumber id, status, attempts;
	int set[kSet];
	int nset;
	Oid ready, running;
};

Columns
FindColumns(Relation live)
{
	Columns c;
	c.id = RequireAttNum(live, "id");
	c.status = RequireAttNum(live, "status");
	c.attempts = RequireAttNum(live, "attempts");
	for (int i = 0; i < kSet - 1; i++)
		c.set[i] = RequireAttNum(live, kSetColumns[i]);
	c.set[kSet - 1] = FindAttNum(live, kSetColumns[kSet - 1]);
	c.nset = c.set[kSet - 1] == InvalidAttrNumber ? kSet - 1 : kSet;
	Oid status_type = TupleDescAttr(RelationGetDescr(live), c.status - 1)->atttypid;
	c.ready = EnumLabel(status_type, "READY");
	c.running = EnumLabel(status_type, "RUNNING");
	return c;
}

/* ClaimRow stores in `new_slot` the RUNNING version, as the SQL path's
 * UPDATE sets it, of the READY row in `old_slot` (claim `i`). */
void
ClaimRow(const Columns &c, const Claims &claims, int i, TimestampTz at, Datum worker,
         TupleTableSlot *old_slot, TupleTableSlot *new_slot)
{
	bool isnull;
	int64 id = DatumGetInt64(slot_getattr(old_slot, c.id, &isnull));
	Oid status = DatumGetObjectId(slot_getattr(old_slot, c.status, &isnull));
	int32 attempts = DatumGetInt32(slot_getattr(old_slot, c.attempts, &isnull));
	if (id != claims.ids[i] || status != c.ready)
		elog(ERROR, "pqrun: the deferred claim of job %lld does not match its row", (long long)claims.ids[i]);
	Datum values[kSet] = {ObjectIdGetDatum(c.running),
	                      BoolGetDatum(false),
	                      Int32GetDatum(attempts + 1),
	                      TimestampTzGetDatum(at),
	                      worker,
	                      UUIDPGetDatum(const_cast<pg_uuid_t *>(&claims.tokens[i])),
	                      Datum(0),
	                      Int32GetDatum(MyProcPid),
	                      TimestampTzGetDatum(at),
	                      TimestampTzGetDatum(MyStartTimestamp)};
	bool nulls[kSet] = {false, false, false, false, false, false, true, false, false, false};
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
	if (!OpenTables(namespace_id, RowExclusiveLock, &tables, false))
		return false;
	Relation live = tables.live;
	Columns columns = FindColumns(live);
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

} // namespace pqrun::direct_claim
