/* src/jobs/enqueue_direct.cpp — plain jobs inserted below the executor. */
#include "jobs/enqueue_direct.hpp"

#include "jobs/direct_rows.hpp"
#include "jobs/expr_cache.hpp"
#include "jobs/job_row.hpp"
#include "pg/citus.hpp"

namespace pqrun::enqueue_direct {

namespace {

using namespace direct_rows;
using jobs::EnqueueArgs;

/* EnqueuedAttributes answers, by attribute index of job_live (`natts`
 * of them), whether an enqueue sets it (job_row.hpp's `enqueued`). */
bool *
EnqueuedAttributes(const Layout &live, int natts)
{
	auto *set = static_cast<bool *>(palloc0(sizeof(bool) * natts));
	for (int c = 0; c < job_row::kCount; c++)
		if (live.at[c] != InvalidAttrNumber)
			set[live.at[c] - 1] = job_row::kColumns[c].enqueued;
	return set;
}

/* Fill sets `values`/`nulls` to job `args`'s row, as the SQL path's INSERT
 * makes it: the defaults of the columns it does not set (`set`) first,
 * then each column job_row.hpp says an enqueue sets, where job_live has
 * it. */
void
Fill(const Layout &live, const bool *set, ExprState *const *defaults, int natts, ExprContext *econtext,
     const EnqueueArgs &args, Datum *values, bool *nulls)
{
	for (int i = 0; i < natts; i++) {
		values[i] = Datum(0);
		nulls[i] = true;
		if (defaults[i] != nullptr && !set[i])
			values[i] = ExecEvalExprSwitchContext(defaults[i], econtext, &nulls[i]);
	}
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz run_after = jobs::RunAfter(args);
	for (int c = 0; c < job_row::kCount; c++) {
		if (!job_row::kColumns[c].enqueued || live.at[c] == InvalidAttrNumber)
			continue;
		int i = live.at[c] - 1;
		auto arg = [&](jobs::EnqueueArg a) {
			values[i] = args.value[a];
			nulls[i] = args.isnull[a];
		};
		nulls[i] = false;
		switch (c) {
		case job_row::kStatus:
			values[i] = ObjectIdGetDatum(live.ready);
			break;
		case job_row::kDelayed:
			values[i] = BoolGetDatum(run_after > now);
			break;
		case job_row::kPriority:
			arg(jobs::kPriority);
			break;
		case job_row::kMaxAttempts:
			arg(jobs::kMaxAttempts);
			break;
		case job_row::kTimeoutSeconds:
			arg(jobs::kTimeoutSeconds);
			break;
		case job_row::kRunAfter:
			values[i] = TimestampTzGetDatum(run_after);
			break;
		case job_row::kCreatedAt:
		case job_row::kUpdatedAt:
			values[i] = TimestampTzGetDatum(now);
			break;
		case job_row::kQueue:
			arg(jobs::kQueue);
			break;
		case job_row::kJobType:
			arg(jobs::kJobType);
			break;
		case job_row::kPayload:
			arg(jobs::kPayload);
			break;
		case job_row::kConcurrencyKey:
			arg(jobs::kConcurrencyKey);
			break;
		case job_row::kRateWeight:
			arg(jobs::kRateWeight);
			break;
		case job_row::kDedupeKey: /* jobs with these take the SQL path */
		case job_row::kFifoKey:
		case job_row::kDependsOn:
			nulls[i] = true;
			break;
		default:
			elog(ERROR, "pqrun: an enqueue has no value for column %s", job_row::kColumns[c].name);
		}
	}
}

} // namespace

bool
Insert(const EnqueueArgs *jobs, int count, int64 *ids)
{
	/* A shard has no default for id (spi_plans.cpp names it). */
	if (citus::InShards())
		return false;
	Tables tables;
	if (!GoDirect(get_namespace_oid("pqrun", true), RowExclusiveLock, &tables, false))
		return false;
	Relation live = tables.live;
	ExprState *const *defaults = expr_cache::Defaults(live);
	if (defaults == nullptr) {
		tables.Close();
		return false;
	}
	const Layout &layout = tables.live_layout;
	TupleDesc desc = RelationGetDescr(live);
	bool *set = EnqueuedAttributes(layout, desc->natts);
	RowWriter writer(live);
	ExprContext *econtext = GetPerTupleExprContext(writer.estate);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
	auto *values = static_cast<Datum *>(palloc(sizeof(Datum) * desc->natts));
	auto *nulls = static_cast<bool *>(palloc(sizeof(bool) * desc->natts));
	CommandId cid = GetCurrentCommandId(true);
	for (int i = 0; i < count; i++) {
		Fill(layout, set, defaults, desc->natts, econtext, jobs[i], values, nulls);
		ExecStoreHeapTuple(heap_form_tuple(desc, values, nulls), slot, true);
		if (desc->constr)
			ExecConstraints(writer.info, slot, writer.estate);
		table_tuple_insert(live, slot, cid, 0, nullptr);
		list_free(compat::InsertIndexTuples(writer.info, slot, writer.estate));
		ids[i] = DatumGetInt64(values[layout.at[job_row::kId] - 1]);
		ExecClearTuple(slot);
		ResetPerTupleExprContext(writer.estate);
	}
	ExecDropSingleTupleTableSlot(slot);
	writer.Close();
	tables.Close();
	return true;
}

} // namespace pqrun::enqueue_direct
