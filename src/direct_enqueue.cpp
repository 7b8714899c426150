/* src/direct_enqueue.cpp — plain jobs inserted below the executor. */
#include "direct_enqueue.hpp"

#include "direct_rows.hpp"
#include "expr_cache.hpp"

namespace pqrun::direct_enqueue {

namespace {

using namespace direct_rows;
using queue::EnqueueArgs;

/* The job_live columns an enqueue sets (the SQL path's INSERT column list),
 * and id, which it reads back. */
enum Column {
	kId,
	kStatus,
	kDelayed,
	kPriority,
	kMaxAttempts,
	kTimeoutSeconds,
	kRunAfter,
	kCreatedAt,
	kUpdatedAt,
	kQueue,
	kJobType,
	kDedupeKey,
	kFifoKey,
	kDependsOn,
	kPayload,
	kColumnCount
};

struct ColumnDef {
	const char *name;
	Oid type; /* InvalidOid: pqrun's job_status enum */
};

constexpr ColumnDef kColumns[kColumnCount] = {
    {"id", INT8OID},
    {"status", InvalidOid},
    {"delayed", BOOLOID},
    {"priority", INT4OID},
    {"max_attempts", INT4OID},
    {"timeout_seconds", INT4OID},
    {"run_after", TIMESTAMPTZOID},
    {"created_at", TIMESTAMPTZOID},
    {"updated_at", TIMESTAMPTZOID},
    {"queue", TEXTOID},
    {"job_type", TEXTOID},
    {"dedupe_key", TEXTOID},
    {"fifo_key", TEXTOID},
    {"depends_on", INT8ARRAYOID},
    {"payload", JSONBOID},
};

/* Where the columns are, by Column, and which attributes an enqueue sets
 * (all of kColumns but id). */
struct Layout {
	int index[kColumnCount]; /* attribute number - 1 */
	bool *set;
	Oid ready;
};

/* FindLayout answers false when a column is missing or of another type than
 * pqrun gave it. */
bool
FindLayout(Relation live, Layout *layout)
{
	TupleDesc desc = RelationGetDescr(live);
	layout->set = static_cast<bool *>(palloc0(sizeof(bool) * desc->natts));
	for (int c = 0; c < kColumnCount; c++)
		layout->index[c] = -1;
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		for (int c = 0; c < kColumnCount && !att->attisdropped; c++) {
			if (strcmp(NameStr(att->attname), kColumns[c].name) != 0)
				continue;
			if (kColumns[c].type == InvalidOid ? !type_is_enum(att->atttypid) : att->atttypid != kColumns[c].type)
				return false;
			layout->index[c] = i;
			layout->set[i] = c != kId;
		}
	}
	for (int c = 0; c < kColumnCount; c++)
		if (layout->index[c] < 0)
			return false;
	layout->ready = EnumLabel(TupleDescAttr(desc, layout->index[kStatus])->atttypid, "READY");
	return true;
}

/* Fill sets `values`/`nulls` to job `args`'s row, as the SQL path's INSERT
 * makes it: the defaults of the columns it does not set first. */
void
Fill(const Layout &layout, ExprState *const *defaults, int natts, ExprContext *econtext, const EnqueueArgs &args,
     Datum *values, bool *nulls)
{
	for (int i = 0; i < natts; i++) {
		values[i] = Datum(0);
		nulls[i] = true;
		if (defaults[i] != nullptr && !layout.set[i])
			values[i] = ExecEvalExprSwitchContext(defaults[i], econtext, &nulls[i]);
	}
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz run_after = queue::RunAfter(args);
	auto set = [&](Column c, Datum value, bool isnull = false) {
		values[layout.index[c]] = value;
		nulls[layout.index[c]] = isnull;
	};
	auto set_arg = [&](Column c, queue::EnqueueArg arg) { set(c, args.value[arg], args.isnull[arg]); };
	set(kStatus, ObjectIdGetDatum(layout.ready));
	set(kDelayed, BoolGetDatum(run_after > now));
	set_arg(kPriority, queue::kPriority);
	set_arg(kMaxAttempts, queue::kMaxAttempts);
	set_arg(kTimeoutSeconds, queue::kTimeoutSeconds);
	set(kRunAfter, TimestampTzGetDatum(run_after));
	set(kCreatedAt, TimestampTzGetDatum(now));
	set(kUpdatedAt, TimestampTzGetDatum(now));
	set_arg(kQueue, queue::kQueue);
	set_arg(kJobType, queue::kJobType);
	set(kDedupeKey, Datum(0), true);
	set(kFifoKey, Datum(0), true);
	set(kDependsOn, Datum(0), true);
	set_arg(kPayload, queue::kPayload);
}

} // namespace

bool
Insert(const EnqueueArgs *jobs, int count, int64 *ids)
{
	Tables tables;
	if (!OpenTables(get_namespace_oid("pqrun", true), RowExclusiveLock, &tables, false))
		return false;
	Relation live = tables.live;
	Layout layout;
	ExprState *const *defaults = expr_cache::Defaults(live);
	if (defaults == nullptr || !FindLayout(live, &layout)) {
		tables.Close();
		return false;
	}
	TupleDesc desc = RelationGetDescr(live);
	RowWriter writer(live);
	ExprContext *econtext = GetPerTupleExprContext(writer.estate);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
	auto *values = static_cast<Datum *>(palloc(sizeof(Datum) * desc->natts));
	auto *nulls = static_cast<bool *>(palloc(sizeof(bool) * desc->natts));
	CommandId cid = GetCurrentCommandId(true);
	for (int i = 0; i < count; i++) {
		Fill(layout, defaults, desc->natts, econtext, jobs[i], values, nulls);
		ExecStoreHeapTuple(heap_form_tuple(desc, values, nulls), slot, true);
		if (desc->constr)
			ExecConstraints(writer.info, slot, writer.estate);
		table_tuple_insert(live, slot, cid, 0, nullptr);
		list_free(compat::InsertIndexTuples(writer.info, slot, writer.estate));
		ids[i] = DatumGetInt64(values[layout.index[kId]]);
		ExecClearTuple(slot);
		ResetPerTupleExprContext(writer.estate);
	}
	ExecDropSingleTupleTableSlot(slot);
	writer.Close();
	tables.Close();
	return true;
}

} // namespace pqrun::direct_enqueue
