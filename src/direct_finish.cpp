/* src/direct_finish.cpp — mark_done_batch of deferred claims, below the executor. */
#include "direct_finish.hpp"

#include "deferred_claims.hpp"

namespace pqrun::direct_finish {

namespace {

/* Where a job_done column's value comes from. */
enum class Source { kLive, kNull, kDoneStatus, kNextAttempt, kDuration, kClaimedAt, kNow, kToken, kWorker, kOutcome };

struct Override {
	const char *column;
	Source source;
};

/* What the DONE attempt changes; every other column of job_done is copied
 * from job_live's column of the same name. */
constexpr Override kOverrides[] = {
	{"status", Source::kDoneStatus}, {"attempts", Source::kNextAttempt}, {"duration_ms", Source::kDuration},
	{"locked_at", Source::kClaimedAt}, {"finished_at", Source::kNow},   {"updated_at", Source::kNow},
	{"lease_token", Source::kToken},  {"locked_by", Source::kWorker},   {"outcome", Source::kOutcome},
	{"result", Source::kNull},
};

/* RequireAttNum finds a column of `rel` by name. */
AttrNumber
RequireAttNum(Relation rel, const char *name)
{
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att->attnum;
	}
	elog(ERROR, "pqrun: %s has no column %s", RelationGetRelationName(rel), name);
}

Oid
EnumLabel(Oid type_id, const char *label)
{
	Oid oid = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid, ObjectIdGetDatum(type_id), CStringGetDatum(label));
	if (!OidIsValid(oid))
		elog(ERROR, "pqrun: job_status has no label %s", label);
	return oid;
}

/* Rows moved per multi-row insert, as COPY buffers them. */
constexpr int kMaxChunk = 1000;

/* Operators may add triggers, row security or generated columns to pqrun's
 * tables, or partition them; the SQL path honours those, this one would not. */
bool
PlainTable(Relation rel)
{
	return rel->rd_rel->relkind == RELKIND_RELATION && !rel->rd_rel->relispartition && !rel->rd_rel->relhastriggers &&
	       !rel->rd_rel->relrowsecurity && !(rel->rd_att->constr && rel->rd_att->constr->has_generated_stored);
}

/* The SQL path's duration: whole milliseconds from claim to now, rounded,
 * clamped to int. */
int32
DurationMs(TimestampTz claimed_at, TimestampTz now)
{
	int64 ms = (Max(now - claimed_at, 0) + 500) / 1000;
	return ms > PG_INT32_MAX ? PG_INT32_MAX : static_cast<int32>(ms);
}

/* The job_done row source, per column. */
struct Layout {
	int natts;
	Source *source;
	AttrNumber *live_attnum; /* for Source::kLive */
	AttrNumber live_id, live_status, live_attempts, live_fifo_key, live_has_dependents, live_queue, live_job_type;
	Oid ready, done;
	Datum outcome; /* 'done' */
};

Layout
MakeLayout(Relation live, Relation done)
{
	TupleDesc done_desc = RelationGetDescr(done);
	Layout layout;
	layout.natts = done_desc->natts;
	layout.source = static_cast<Source *>(palloc(sizeof(Source) * layout.natts));
	layout.live_attnum = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * layout.natts));
	for (int i = 0; i < layout.natts; i++) {
		Form_pg_attribute att = TupleDescAttr(done_desc, i);
		layout.source[i] = Source::kNull;
		if (att->attisdropped)
			continue;
		const char *name = NameStr(att->attname);
		bool overridden = false;
		for (const Override &o : kOverrides) {
			if (strcmp(o.column, name) == 0) {
				layout.source[i] = o.source;
				overridden = true;
			}
		}
		if (!overridden) {
			layout.source[i] = Source::kLive;
			layout.live_attnum[i] = RequireAttNum(live, name);
		}
	}
	layout.live_id = RequireAttNum(live, "id");
	layout.live_status = RequireAttNum(live, "status");
	layout.live_attempts = RequireAttNum(live, "attempts");
	layout.live_fifo_key = RequireAttNum(live, "fifo_key");
	layout.live_has_dependents = RequireAttNum(live, "has_dependents");
	layout.live_queue = RequireAttNum(live, "queue");
	layout.live_job_type = RequireAttNum(live, "job_type");
	Oid status_type = TupleDescAttr(RelationGetDescr(live), layout.live_status - 1)->atttypid;
	layout.ready = EnumLabel(status_type, "READY");
	layout.done = EnumLabel(status_type, "DONE");
	layout.outcome = CStringGetTextDatum("done");
	return layout;
}

/* BuildDone stores in `done_slot` the DONE attempt of the READY row in
 * `live_slot` (claim i of `taken`), as a copy that outlives the live row's
 * buffer, and fills `out` for the caller's statistics. */
void
BuildDone(const Layout &layout, const deferred_claims::Taken &taken, int i, TupleTableSlot *live_slot,
          TupleTableSlot *done_slot, Moved *out)
{
	const Datum *lv = live_slot->tts_values;
	const bool *ln = live_slot->tts_isnull;
	int64 id = taken.claims.ids[i];
	if (DatumGetInt64(lv[layout.live_id - 1]) != id || DatumGetObjectId(lv[layout.live_status - 1]) != layout.ready ||
	    !ln[layout.live_fifo_key - 1])
		elog(ERROR, "pqrun: the deferred claim of job %lld does not match its row", (long long)id);
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	out->id = id;
	out->has_dependents = DatumGetBool(lv[layout.live_has_dependents - 1]);
	out->queue = TextDatumGetCString(lv[layout.live_queue - 1]);
	out->job_type = TextDatumGetCString(lv[layout.live_job_type - 1]);
	out->duration_ms = (now - taken.at) / 1000;

	ExecClearTuple(done_slot);
	Datum *values = done_slot->tts_values;
	bool *nulls = done_slot->tts_isnull;
	for (int a = 0; a < layout.natts; a++) {
		nulls[a] = false;
		switch (layout.source[a]) {
		case Source::kLive:
			values[a] = lv[layout.live_attnum[a] - 1];
			nulls[a] = ln[layout.live_attnum[a] - 1];
			break;
		case Source::kNull:
			values[a] = Datum(0);
			nulls[a] = true;
			break;
		case Source::kDoneStatus:
			values[a] = ObjectIdGetDatum(layout.done);
			break;
		case Source::kNextAttempt:
			values[a] = Int32GetDatum(DatumGetInt32(lv[layout.live_attempts - 1]) + 1);
			break;
		case Source::kDuration:
			values[a] = Int32GetDatum(DurationMs(taken.at, now));
			break;
		case Source::kClaimedAt:
			values[a] = TimestampTzGetDatum(taken.at);
			break;
		case Source::kNow:
			values[a] = TimestampTzGetDatum(now);
			break;
		case Source::kToken:
			values[a] = UUIDPGetDatum(&taken.claims.tokens[i]);
			break;
		case Source::kWorker:
			values[a] = taken.worker;
			break;
		case Source::kOutcome:
			values[a] = layout.outcome;
			break;
		}
	}
	ExecStoreVirtualTuple(done_slot);
	ExecMaterializeSlot(done_slot);
}

/* MoveChunk moves claims [first, first + n) of `taken`: each DONE attempt
 * is checked against job_done's constraints, all go in with one multi-row
 * insert (as COPY does), then each gets its index entries, and only then
 * are the live rows deleted, since a TOASTed payload is copied from
 * job_live's TOAST table, which the delete clears. */
void
MoveChunk(const Layout &layout, const deferred_claims::Taken &taken, int first, int n, Relation live,
          TupleTableSlot *live_slot, ResultRelInfo *done_info, EState *estate, TupleTableSlot **done_slots, Moved *out)
{
	Relation done = done_info->ri_RelationDesc;
	for (int j = 0; j < n; j++) {
		ItemPointerData tid = taken.claims.ctids[first + j];
		/* The row is locked by this subtransaction: SnapshotSelf sees it
		 * unless this transaction deleted or updated it since. */
		if (!table_tuple_fetch_row_version(live, &tid, SnapshotSelf, live_slot))
			elog(ERROR, "pqrun: the deferred claim of job %lld lost its row", (long long)taken.claims.ids[first + j]);
		slot_getallattrs(live_slot);
		BuildDone(layout, taken, first + j, live_slot, done_slots[j], &out[first + j]);
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

} // namespace

int
FinishDeferred(int n, const Datum *ids, const Datum *leases, Moved *out)
{
	Oid namespace_id = deferred_claims::FinishableIn();
	if (!OidIsValid(namespace_id))
		return 0;
	Oid live_id = get_relname_relid("job_live", namespace_id);
	Oid done_id = get_relname_relid("job_done", namespace_id);
	if (!OidIsValid(live_id) || !OidIsValid(done_id))
		return 0;
	Relation live = table_open(live_id, RowExclusiveLock);
	Relation done = table_open(done_id, RowExclusiveLock);
	if (!PlainTable(live) || !PlainTable(done)) {
		table_close(done, NoLock);
		table_close(live, NoLock);
		return 0;
	}
	deferred_claims::Taken taken = deferred_claims::TakeForFinish(n, ids, leases);
	int count = taken.claims.count;
	if (count > 0) {
		Layout layout = MakeLayout(live, done);
		EState *estate = CreateExecutorState();
		ResultRelInfo *done_info = makeNode(ResultRelInfo);
		InitResultRelInfo(done_info, done, 0, nullptr, 0);
		ExecOpenIndices(done_info, false);
		TupleTableSlot *live_slot = table_slot_create(live, nullptr);
		int chunk = Min(count, kMaxChunk);
		auto **done_slots = static_cast<TupleTableSlot **>(palloc(sizeof(TupleTableSlot *) * chunk));
		for (int j = 0; j < chunk; j++)
			done_slots[j] = table_slot_create(done, nullptr);
		for (int first = 0; first < count; first += chunk)
			MoveChunk(layout, taken, first, Min(chunk, count - first), live, live_slot, done_info, estate, done_slots,
			          out);
		for (int j = 0; j < chunk; j++)
			ExecDropSingleTupleTableSlot(done_slots[j]);
		ExecDropSingleTupleTableSlot(live_slot);
		ExecCloseIndices(done_info);
		FreeExecutorState(estate);
		/* A statement boundary, as SPI makes one after each statement. */
		CommandCounterIncrement();
	}
	table_close(done, NoLock);
	table_close(live, NoLock);
	return count;
}

} // namespace pqrun::direct_finish
