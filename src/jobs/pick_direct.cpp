/* src/jobs/pick_direct.cpp — a pickup's locking scan below the executor. */
#include "jobs/pick_direct.hpp"
#include "pg/citus.hpp"

#include "jobs/direct_rows.hpp"
#include "jobs/flow_control.hpp"
#include "jobs/job_row.hpp"
#include "jobs/lease_token.hpp"
#include "jobs/pick_lanes.hpp"
#include "jobs/queue_types.hpp"
#include "xact/deferred_claims.hpp"

namespace pqrun::pick_direct {

namespace {

using namespace direct_rows;

using job_row::kColumns;
using job_row::kId;
using job_row::kJobType;
using job_row::kPriority;
using job_row::kQueue;
using job_row::Picked;
constexpr int kOut = job_row::kJobsCount;

/* The job_live columns the pick reads, by output column, and what it
 * checks. */
struct PickLayout {
	AttrNumber from[kOut]; /* 0 where the value is not a column */
	AttrNumber status, delayed;
	AttrNumber key; /* concurrency_key, InvalidAttrNumber when job_live has none */
	Oid status_type, ready, running;
	Oid queue_collation, job_type_collation;
};

/* FindLayout finds the pick's columns in the layout of `tables` (GoDirect
 * checked their names and types against job_row.hpp), answering false
 * when the pickup's result (`out_desc`, none for a look that hands out
 * nothing) is not the row of job_row.hpp, names and types. */
bool
FindLayout(const Tables &tables, TupleDesc out_desc, PickLayout *l)
{
	const direct_rows::Layout &live = tables.live_layout;
	TupleDesc desc = RelationGetDescr(tables.live);
	if (out_desc != nullptr &&
	    (out_desc->natts != kOut || TupleDescAttr(out_desc, job_row::kStatus)->atttypid != live.status_type))
		return false;
	for (int i = 0; i < kOut; i++) {
		Oid type = OidIsValid(kColumns[i].type) ? kColumns[i].type : live.status_type;
		Form_pg_attribute out = out_desc != nullptr ? TupleDescAttr(out_desc, i) : nullptr;
		if (out != nullptr && (out->atttypid != type || strcmp(NameStr(out->attname), kColumns[i].name) != 0))
			return false;
		bool from_live = kColumns[i].picked == Picked::kColumn || kColumns[i].picked == Picked::kNextAttempt;
		l->from[i] = from_live ? live.at[i] : 0;
	}
	/* GoDirect checked the types of job_live's columns. */
	l->status = live.at[job_row::kStatus];
	l->delayed = live.at[job_row::kDelayed];
	l->key = live.at[job_row::kConcurrencyKey];
	l->status_type = live.status_type;
	l->ready = live.ready;
	l->running = live.running;
	l->queue_collation = TupleDescAttr(desc, l->from[kQueue] - 1)->attcollation;
	l->job_type_collation = TupleDescAttr(desc, l->from[kJobType] - 1)->attcollation;
	return true;
}

/* What KeyedAsOurs last answered for one index, and for which version of
 * it. */
struct KnownIndex {
	Oid index = InvalidOid;
	TransactionId xmin = InvalidTransactionId;
	bool ours = false;
};

/* KeyedAsOurs answers whether the only expression of `index` is
 * -(priority::bigint) and every READY job that is not delayed and whose
 * concurrency key passes `key_test` (IS NULL: the pick index, IS NOT NULL:
 * the lanes) satisfies its predicate. An index recreated otherwise would
 * order the jobs another way or miss some, where the SQL statement plans
 * around it. Neither can change without a new index or a new pg_index row,
 * so the answer is kept in `known` for the index's version. */
bool
KeyedAsOurs(Relation index, const PickLayout &l, NullTestType key_test, KnownIndex *known)
{
	TransactionId xmin = HeapTupleHeaderGetXmin(index->rd_indextuple->t_data);
	if (RelationGetRelid(index) == known->index && xmin == known->xmin)
		return known->ours;

	List *exprs = RelationGetIndexExpressions(index);
	bool ours = false;
	if (list_length(exprs) == 1 && IsA(linitial(exprs), OpExpr)) {
		const auto *negate = castNode(OpExpr, linitial(exprs));
		const auto *cast = list_length(negate->args) == 1 && IsA(linitial(negate->args), FuncExpr)
		                       ? castNode(FuncExpr, linitial(negate->args))
		                       : nullptr;
		ours = negate->opfuncid == F_INT8UM && cast != nullptr && cast->funcid == F_INT8_INT4 &&
		       list_length(cast->args) == 1 && IsA(linitial(cast->args), Var) &&
		       castNode(Var, linitial(cast->args))->varattno == l.from[kPriority];
	}
	if (ours) {
		Expr *ready = make_opclause(lookup_type_cache(l.status_type, TYPECACHE_EQ_OPR)->eq_opr, BOOLOID, false,
		                            reinterpret_cast<Expr *>(makeVar(1, l.status, l.status_type, -1, InvalidOid, 0)),
		                            reinterpret_cast<Expr *>(makeConst(l.status_type, -1, InvalidOid, sizeof(Oid),
		                                                               ObjectIdGetDatum(l.ready), false, true)),
		                            InvalidOid, InvalidOid);
		fix_opfuncids(reinterpret_cast<Node *>(ready));
		Expr *not_delayed = make_notclause(reinterpret_cast<Expr *>(makeVar(1, l.delayed, BOOLOID, -1, InvalidOid, 0)));
		List *picked = list_make2(ready, not_delayed);
		if (l.key != InvalidAttrNumber) {
			/* Keyed jobs are in their lanes (pick_lanes.hpp), not in the pick index. */
			NullTest *keyed = makeNode(NullTest);
			keyed->arg = reinterpret_cast<Expr *>(makeVar(1, l.key, TEXTOID, -1, DEFAULT_COLLATION_OID, 0));
			keyed->nulltesttype = key_test;
			keyed->argisrow = false;
			keyed->location = -1;
			picked = lappend(picked, keyed);
		}
		ours = predicate_implied_by(RelationGetIndexPredicate(index), picked, false);
	}
	*known = KnownIndex{RelationGetRelid(index), xmin, ours};
	return ours;
}

/* OpenPickIndex opens job_live_pick when it is pqrun's: a valid btree on
 * job_live keyed by the ascending negated priority as a bigint (KeyedAsOurs)
 * and the ascending id, holding every READY job that is not delayed. */
Relation
OpenPickIndex(Oid namespace_id, Relation live, const PickLayout &l)
{
	static KnownIndex known;
	Oid index_id = get_relname_relid(citus::Scoped("job_live_pick"), namespace_id);
	if (!OidIsValid(index_id) || get_rel_relkind(index_id) != RELKIND_INDEX)
		return nullptr;
	Relation index = index_open(index_id, RowShareLock);
	const Form_pg_index form = index->rd_index;
	bool ours = form->indrelid == RelationGetRelid(live) && form->indisvalid && index->rd_rel->relam == BTREE_AM_OID &&
	            IndexRelationGetNumberOfKeyAttributes(index) == 2 && form->indkey.values[0] == 0 &&
	            form->indkey.values[1] == l.from[kId] &&
	            TupleDescAttr(RelationGetDescr(index), 0)->atttypid == INT8OID &&
	            index->rd_opfamily[0] == INTEGER_BTREE_FAM_OID && index->rd_opfamily[1] == INTEGER_BTREE_FAM_OID &&
	            index->rd_indoption[0] == 0 && index->rd_indoption[1] == 0 && KeyedAsOurs(index, l, IS_NULL, &known);
	if (ours)
		return index;
	index_close(index, RowShareLock);
	return nullptr;
}

/* OpenLaneIndex opens job_live_lane when it is pqrun's: a valid btree on
 * job_live keyed by queue and concurrency_key (text_ops, in byte order),
 * the ascending negated priority as a bigint (KeyedAsOurs) and
 * the ascending id, holding every READY job that is not delayed and has a
 * key. */
Relation
OpenLaneIndex(Oid namespace_id, Relation live, const PickLayout &l)
{
	static KnownIndex known;
	Oid index_id = get_relname_relid(citus::Scoped("job_live_lane"), namespace_id);
	if (l.key == InvalidAttrNumber || !OidIsValid(index_id) || get_rel_relkind(index_id) != RELKIND_INDEX)
		return nullptr;
	Relation index = index_open(index_id, RowShareLock);
	const Form_pg_index form = index->rd_index;
	TupleDesc desc = RelationGetDescr(live);
	bool ours = form->indrelid == RelationGetRelid(live) && form->indisvalid && index->rd_rel->relam == BTREE_AM_OID &&
	            IndexRelationGetNumberOfKeyAttributes(index) == 4 && form->indkey.values[0] == l.from[kQueue] &&
	            form->indkey.values[1] == l.key && form->indkey.values[2] == 0 &&
	            form->indkey.values[3] == l.from[kId] && TupleDescAttr(desc, l.key - 1)->atttypid == TEXTOID &&
	            index->rd_opfamily[0] == TEXT_BTREE_FAM_OID && index->rd_opfamily[1] == TEXT_BTREE_FAM_OID &&
	            index->rd_opfamily[2] == INTEGER_BTREE_FAM_OID && index->rd_opfamily[3] == INTEGER_BTREE_FAM_OID &&
	            index->rd_indcollation[0] == C_COLLATION_OID && index->rd_indcollation[1] == C_COLLATION_OID &&
	            index->rd_indoption[0] == 0 && index->rd_indoption[1] == 0 && index->rd_indoption[2] == 0 &&
	            index->rd_indoption[3] == 0 && KeyedAsOurs(index, l, IS_NOT_NULL, &known);
	if (ours)
		return index;
	index_close(index, RowShareLock);
	return nullptr;
}

/* OpenFilterIndex opens job_live_pick_queue (`by_queue`) or
 * job_live_pick_type when it is pqrun's: a valid btree on job_live keyed by
 * queue and job type, or by job type (text_ops), then the ascending negated
 * priority as a bigint (KeyedAsOurs) and the ascending id, holding every
 * READY job that is not delayed and has no key. */
Relation
OpenFilterIndex(Oid namespace_id, Relation live, const PickLayout &l, bool by_queue)
{
	static KnownIndex known[2];
	Oid index_id = get_relname_relid(citus::Scoped(by_queue ? "job_live_pick_queue" : "job_live_pick_type"), namespace_id);
	if (!OidIsValid(index_id) || get_rel_relkind(index_id) != RELKIND_INDEX)
		return nullptr;
	Relation index = index_open(index_id, RowShareLock);
	const Form_pg_index form = index->rd_index;
	TupleDesc desc = RelationGetDescr(index);
	int lead = by_queue ? 2 : 1;
	bool ours = form->indrelid == RelationGetRelid(live) && form->indisvalid && index->rd_rel->relam == BTREE_AM_OID &&
	            IndexRelationGetNumberOfKeyAttributes(index) == lead + 2 &&
	            (!by_queue || form->indkey.values[0] == l.from[kQueue]) &&
	            form->indkey.values[lead - 1] == l.from[kJobType] && form->indkey.values[lead] == 0 &&
	            form->indkey.values[lead + 1] == l.from[kId] && TupleDescAttr(desc, lead)->atttypid == INT8OID &&
	            index->rd_opfamily[lead] == INTEGER_BTREE_FAM_OID && index->rd_opfamily[lead + 1] == INTEGER_BTREE_FAM_OID;
	for (int i = 0; ours && i < lead + 2; i++)
		ours = index->rd_indoption[i] == 0 && (i >= lead || (TupleDescAttr(desc, i)->atttypid == TEXTOID &&
		                                                      index->rd_opfamily[i] == TEXT_BTREE_FAM_OID));
	if (ours && KeyedAsOurs(index, l, IS_NULL, &known[by_queue ? 1 : 0]))
		return index;
	index_close(index, RowShareLock);
	return nullptr;
}

/* A job_types or queues argument, unpacked once. */
struct Filter {
	Datum *elems = nullptr;
	bool *nulls = nullptr;
	int count = -1; /* -1: any */

	explicit Filter(ArrayType *array)
	{
		if (array != nullptr)
			deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
	}

	/* Distinct answers the array's values without NULLs and without
	 * repeats (equal under `collation`), in `*n`. */
	Datum *Distinct(Oid collation, int *n) const
	{
		Datum *out = static_cast<Datum *>(palloc(sizeof(Datum) * (count + 1)));
		int all = 0;
		for (int i = 0; i < count; i++)
			if (!nulls[i])
				out[all++] = elems[i];
		auto compare = [](const void *a, const void *b, void *arg) {
			return DatumGetInt32(DirectFunctionCall2Coll(bttextcmp, *static_cast<Oid *>(arg),
			                                             *static_cast<const Datum *>(a), *static_cast<const Datum *>(b)));
		};
		qsort_arg(out, all, sizeof(Datum), compare, &collation);
		*n = 0;
		for (int i = 0; i < all; i++)
			if (*n == 0 || compare(&out[*n - 1], &out[i], &collation) != 0)
				out[(*n)++] = out[i];
		return out;
	}

	/* Matches is `value = ANY (array)` under `collation`, as in SQL. */
	bool Matches(Datum value, Oid collation) const
	{
		if (count < 0)
			return true;
		for (int i = 0; i < count; i++)
			if (!nulls[i] && DatumGetBool(DirectFunctionCall2Coll(texteq, collation, value, elems[i])))
				return true;
		return false;
	}
};

/* Qualifies answers whether the row in `slot` is one the pick statement
 * selects: READY, not delayed, of a wanted type and queue, at or past the
 * start key, and not held back by a pause or a full limit. */
bool
Qualifies(const PickLayout &l, const Request &r, const Filter &types, const Filter &queues, TupleTableSlot *slot)
{
	bool isnull;
	if (DatumGetObjectId(slot_getattr(slot, l.status, &isnull)) != l.ready ||
	    DatumGetBool(slot_getattr(slot, l.delayed, &isnull)))
		return false;
	if (l.key != InvalidAttrNumber && (slot_getattr(slot, l.key, &isnull), !isnull))
		return false;
	pick_hint::PickKey key = pick_hint::KeyOf(DatumGetInt32(slot_getattr(slot, l.from[kPriority], &isnull)),
	                                DatumGetInt64(slot_getattr(slot, l.from[kId], &isnull)));
	if (pick_hint::Less(key, r.start))
		return false;
	Datum job_type = slot_getattr(slot, l.from[kJobType], &isnull);
	Datum queue = slot_getattr(slot, l.from[kQueue], &isnull);
	return types.Matches(job_type, l.job_type_collation) && queues.Matches(queue, l.queue_collation) &&
	       !(r.gated && flow_control::Blocked(queue, job_type));
}

/* EmitClaim hands out the job locked in `slot` as the claim makes it,
 * answering emit's answer. */
bool
EmitClaim(const PickLayout &l, const Request &r, TupleTableSlot *slot, Emit emit, void *arg)
{
	slot_getallattrs(slot);
	Datum values[kOut + 1];
	bool nulls[kOut + 1];
	pg_uuid_t token;
	ItemPointerData ctid = slot->tts_tid;
	for (int i = 0; i < kOut; i++) {
		nulls[i] = false;
		switch (kColumns[i].picked) {
		case Picked::kColumn:
			values[i] = slot->tts_values[l.from[i] - 1];
			nulls[i] = slot->tts_isnull[l.from[i] - 1];
			break;
		case Picked::kRunning:
			values[i] = ObjectIdGetDatum(l.running);
			break;
		case Picked::kNextAttempt:
			values[i] = Int32GetDatum(DatumGetInt32(slot->tts_values[l.from[i] - 1]) + 1);
			break;
		case Picked::kAt:
			values[i] = TimestampTzGetDatum(r.at);
			break;
		case Picked::kWorker:
			values[i] = r.worker;
			break;
		case Picked::kToken:
			lease_token::New(&token);
			values[i] = UUIDPGetDatum(&token);
			break;
		case Picked::kNull:
			values[i] = Datum(0);
			nulls[i] = true;
			break;
		}
	}
	values[kOut] = PointerGetDatum(&ctid);
	nulls[kOut] = false;
	return emit(arg, values, nulls);
}

/* StartKey is the index condition (-priority, id) >= start, a row
 * comparison whose members carry btree's comparison function. */
void
StartKey(const pick_hint::PickKey &start, ScanKeyData *header, ScanKeyData members[2])
{
	ScanKeyEntryInitialize(&members[0], SK_ROW_MEMBER, 1, BTGreaterEqualStrategyNumber, INT8OID, InvalidOid,
	                       F_BTINT8CMP, Int64GetDatum(start.neg_priority));
	ScanKeyEntryInitialize(&members[1], SK_ROW_MEMBER | SK_ROW_END, 2, BTGreaterEqualStrategyNumber, INT8OID,
	                       InvalidOid, F_BTINT8CMP, Int64GetDatum(start.id));
	MemSet(header, 0, sizeof(ScanKeyData));
	header->sk_flags = SK_ROW_HEADER;
	header->sk_attno = 1;
	header->sk_strategy = BTGreaterEqualStrategyNumber;
	header->sk_argument = PointerGetDatum(members);
}

/* TryClaim locks the row at `tid` as LockRows does for FOR UPDATE SKIP
 * LOCKED in READ COMMITTED, into `locked`, and emits it, answering whether
 * it is claimed. Passed over: a row another transaction holds, or deleted,
 * or a version this command cannot lock; and a version newer than the
 * snapshot's that no longer qualifies, which stays locked. */
bool
TryClaim(Relation live, ItemPointerData tid, Snapshot snapshot, TupleTableSlot *locked, const PickLayout &l,
         const Request &r, const Filter &types, const Filter &queues, Emit emit, void *arg)
{
	TM_FailureData tmfd;
	/* table_tuple_lock moves the tid on to the version it locks. */
	TM_Result result = table_tuple_lock(live, &tid, snapshot, locked, GetCurrentCommandId(true), LockTupleExclusive,
	                                    LockWaitSkip, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	bool claimed = result == TM_Ok && (!tmfd.traversed || Qualifies(l, r, types, queues, locked)) &&
	               EmitClaim(l, r, locked, emit, arg);
	ExecClearTuple(locked);
	return claimed;
}

/* LockAndEmit walks `index` from the request's start and locks up to its
 * limit of qualifying rows under `snapshot`, answering how many. */
uint64
LockAndEmit(Relation live, Relation index, const PickLayout &l, const Request &r, Snapshot snapshot, Emit emit,
            void *arg)
{
	Filter types(r.filter.job_types), queues(r.filter.queues);
	ScanKeyData key, members[2];
	StartKey(r.start, &key, members);
	IndexScanDesc scan = compat::IndexBeginScan(live, index, snapshot, 1);
	index_rescan(scan, &key, 1, nullptr, 0);
	TupleTableSlot *seen = table_slot_create(live, nullptr);
	TupleTableSlot *locked = table_slot_create(live, nullptr);
	uint64 n = 0;
	while (n < static_cast<uint64>(r.limit) && index_getnext_slot(scan, ForwardScanDirection, seen)) {
		CHECK_FOR_INTERRUPTS();
		if (Qualifies(l, r, types, queues, seen) &&
		    TryClaim(live, seen->tts_tid, snapshot, locked, l, r, types, queues, emit, arg))
			n++;
	}
	ExecDropSingleTupleTableSlot(locked);
	ExecDropSingleTupleTableSlot(seen);
	index_endscan(scan);
	return n;
}

/* ---- Filter lanes ----------------------------------------------------------
 *
 * A pickup filtered by job type walks job_live_pick_type, one lane per job
 * type; one filtered by queue (and job type) walks job_live_pick_queue, one
 * lane per queue and job type: the job types of each queue are found there
 * too, a descent each. Each lane is in pickup order; the pickup merges
 * their heads, so it reads what it claims plus a head per lane, whatever
 * the other queues and job types hold. Each lane starts at its hint, shared
 * with the keyed lanes' (pick_lanes.hpp), past the head of claimed and
 * ended jobs whose entries vacuum has not removed yet: the global pickup
 * hint is the lowest READY job of all, which a backlog elsewhere holds
 * down. */

/* One lane: its key values, and the next job it may lock. */
struct FilterLane {
	Datum queue; /* Datum(0) on job_live_pick_type */
	Datum job_type;
	pick_hint::PickKey head;
	ItemPointerData tid;
	bool done;
	bool clean;                   /* every job this pick passed in it was one no pickup may claim */
	pick_lanes::FilterLaneName name; /* its hint's, when the pick is hinted */
};

struct FilterLanes {
	Relation index;
	bool by_queue;
	FilterLane *lanes;
	int count;
	IndexScanDesc scan;
	TupleTableSlot *seen;
};

/* TextKey sets `key` to compare text attribute `attno` with `value`: equal,
 * greater or equal, or greater. */
void
TextKey(ScanKeyData *key, AttrNumber attno, StrategyNumber strategy, Oid collation, Datum value)
{
	RegProcedure procedure = strategy == BTEqualStrategyNumber          ? F_TEXTEQ
	                         : strategy == BTGreaterEqualStrategyNumber ? F_TEXT_GE
	                                                                    : F_TEXT_GT;
	ScanKeyEntryInitialize(key, 0, attno, strategy, InvalidOid, collation, procedure, value);
}

/* IndexKey is TextKey on attribute `attno` of `index`, in its collation. */
void
IndexKey(ScanKeyData *key, Relation index, AttrNumber attno, StrategyNumber strategy, Datum value)
{
	TextKey(key, attno, strategy, index->rd_indcollation[attno - 1], value);
}

/* AddLanes appends the lanes of `queue` to `f`: one per distinct job type
 * of `types`, or, without types, one per job type the index holds for the
 * queue (dead entries too: a descent each), or that queue_types knows when
 * `memo` (then `gen` was read before the pick's snapshot). A lane whose
 * queue and job type its controls hold back is left out whole. */
void
AddLanes(FilterLanes *f, Datum queue, const Datum *types, int ntypes, const Request &r, int *capacity, bool memo,
         uint64 gen)
{
	auto add = [&](Datum job_type) {
		if (r.gated && queue != Datum(0) && flow_control::Blocked(queue, job_type))
			return;
		if (f->count == *capacity) {
			*capacity *= 2;
			f->lanes = static_cast<FilterLane *>(repalloc(f->lanes, sizeof(FilterLane) * *capacity));
		}
		f->lanes[f->count++] = FilterLane{queue, job_type, {}, {}, false, true, {}};
	};
	Datum *known;
	if (types != nullptr || (memo && queue_types::Known(queue, &known, &ntypes))) {
		for (int i = 0; i < ntypes; i++)
			add(types != nullptr ? types[i] : known[i]);
		return;
	}
	int nfound = 0, room = 8;
	Datum *found = static_cast<Datum *>(palloc(sizeof(Datum) * room));
	IndexScanDesc keys = compat::IndexBeginScan(f->scan->heapRelation, f->index, GetActiveSnapshot(), 2);
	keys->xs_want_itup = true;
	/* The next job type is the next entry's, dead or not: skipping killed
	 * entries could walk a whole dead lane. */
	keys->ignore_killed_tuples = false;
	ScanKeyData scankeys[2];
	IndexKey(&scankeys[0], f->index, 1, BTEqualStrategyNumber, queue);
	IndexKey(&scankeys[1], f->index, 2, BTGreaterEqualStrategyNumber, CStringGetTextDatum(""));
	for (;;) {
		index_rescan(keys, scankeys, 2, nullptr, 0);
		if (index_getnext_tid(keys, ForwardScanDirection) == nullptr)
			break;
		bool isnull;
		Datum job_type = index_getattr(keys->xs_itup, 2, keys->xs_itupdesc, &isnull);
		if (isnull)
			break;
		job_type = PointerGetDatum(PG_DETOAST_DATUM_COPY(job_type));
		if (nfound == room)
			found = static_cast<Datum *>(repalloc(found, sizeof(Datum) * (room *= 2)));
		found[nfound++] = job_type;
		add(job_type);
		IndexKey(&scankeys[1], f->index, 2, BTGreaterStrategyNumber, job_type);
	}
	index_endscan(keys);
	if (memo)
		queue_types::Remember(queue, found, nfound, gen);
}

/* Advance moves `lane` to its first job from pickup key `from` on that the
 * request may claim, seen under the scan's snapshot, or marks it done. */
void
Advance(FilterLanes *f, FilterLane *lane, pick_hint::PickKey from, const PickLayout &l, const Request &r,
        const Filter &types, const Filter &queues)
{
	ScanKeyData keys[3], members[2];
	int lead = 0;
	if (f->by_queue)
		IndexKey(&keys[lead++], f->index, 1, BTEqualStrategyNumber, lane->queue);
	IndexKey(&keys[lead], f->index, lead + 1, BTEqualStrategyNumber, lane->job_type);
	lead++;
	StartKey(from, &keys[lead], members);
	for (ScanKeyData &member : members)
		member.sk_attno += lead; /* the lane's (-priority, id) */
	keys[lead].sk_attno = lead + 1;
	index_rescan(f->scan, keys, lead + 1, nullptr, 0);
	bool isnull;
	while (index_getnext_slot(f->scan, ForwardScanDirection, f->seen)) {
		CHECK_FOR_INTERRUPTS();
		if (!Qualifies(l, r, types, queues, f->seen))
			continue;
		lane->head = pick_hint::KeyOf(DatumGetInt32(slot_getattr(f->seen, l.from[kPriority], &isnull)),
		                         DatumGetInt64(slot_getattr(f->seen, l.from[kId], &isnull)));
		lane->tid = f->seen->tts_tid;
		ExecClearTuple(f->seen);
		return;
	}
	lane->done = true;
}

/* OpenLanes readies the lanes of a filtered request on `index` (its
 * queues' and job types'), each at its first job from the request's start
 * on, or from its hint when `hinted`; the job types of its queues found
 * before are taken when `memo`. Both hold as of hint generation `gen`. */
FilterLanes
OpenLanes(Relation live, Relation index, bool by_queue, const PickLayout &l, const Request &r, const Filter &types,
          const Filter &queues, bool hinted, bool memo, uint64 gen)
{
	FilterLanes f{index, by_queue, nullptr, 0, nullptr, nullptr};
	int capacity = 16;
	f.lanes = static_cast<FilterLane *>(palloc(sizeof(FilterLane) * capacity));
	f.scan = compat::IndexBeginScan(live, index, GetActiveSnapshot(), by_queue ? 3 : 2);
	f.seen = table_slot_create(live, nullptr);
	int ntypes = 0, nqueues = 0;
	Datum *type_values = types.count >= 0 ? types.Distinct(index->rd_indcollation[by_queue ? 1 : 0], &ntypes) : nullptr;
	if (by_queue) {
		Datum *queue_values = queues.Distinct(index->rd_indcollation[0], &nqueues);
		for (int i = 0; i < nqueues; i++)
			AddLanes(&f, queue_values[i], type_values, ntypes, r, &capacity, memo, gen);
	} else {
		AddLanes(&f, Datum(0), type_values, ntypes, r, &capacity, false, gen);
	}
	for (int i = 0; i < f.count; i++) {
		FilterLane &lane = f.lanes[i];
		pick_hint::PickKey start = r.start;
		if (hinted) {
			lane.name = pick_lanes::NameFilterLane(lane.queue, lane.job_type);
			pick_hint::PickKey hint = pick_lanes::FilterLaneStart(lane.name);
			if (hint.neg_priority == INT64_MAX) {
				lane.done = true;
				continue;
			}
			if (pick_hint::Less(start, hint))
				start = hint;
		}
		Advance(&f, &lane, start, l, r, types, queues);
	}
	return f;
}

void
CloseLanes(FilterLanes *f)
{
	ExecDropSingleTupleTableSlot(f->seen);
	index_endscan(f->scan);
}

/* LockAndEmitLanes is LockAndEmit over the lanes of `index`: it locks the
 * lanes' heads in pickup order, the lowest first, and moves each lane on
 * past the head it tried. When `hinted`, a lane in which it passed nothing
 * another pickup might claim gets its hint moved past its last claim, or
 * to its end (as of hint generation `gen`); `memo` as for OpenLanes. */
uint64
LockAndEmitLanes(Relation live, Relation index, bool by_queue, const PickLayout &l, const Request &r, Snapshot snapshot,
                 Emit emit, void *arg, bool hinted, bool memo, uint64 gen)
{
	Filter types(r.filter.job_types), queues(r.filter.queues);
	FilterLanes f = OpenLanes(live, index, by_queue, l, r, types, queues, hinted, memo, gen);
	TupleTableSlot *locked = table_slot_create(live, nullptr);
	uint64 n = 0;
	while (n < static_cast<uint64>(r.limit)) {
		FilterLane *next = nullptr;
		for (int i = 0; i < f.count; i++)
			if (!f.lanes[i].done && (next == nullptr || pick_hint::Less(f.lanes[i].head, next->head)))
				next = &f.lanes[i];
		if (next == nullptr)
			break;
		pick_hint::PickKey past{next->head.neg_priority, next->head.id + 1};
		if (TryClaim(live, next->tid, snapshot, locked, l, r, types, queues, emit, arg)) {
			n++;
			if (hinted && next->clean)
				pick_lanes::FilterLaneHint(next->name, past, gen);
		} else {
			/* Held by another pickup, or changed since the snapshot: a
			 * hint past it could hide it. */
			next->clean = false;
		}
		if (n < static_cast<uint64>(r.limit))
			Advance(&f, next, past, l, r, types, queues);
	}
	for (int i = 0; hinted && i < f.count; i++)
		if (f.lanes[i].done && f.lanes[i].clean)
			pick_lanes::FilterLaneHint(f.lanes[i].name, pick_hint::PickKey{INT64_MAX, INT64_MAX}, gen);
	ExecDropSingleTupleTableSlot(locked);
	CloseLanes(&f);
	return n;
}

} // namespace

bool
Pick(const Request &request, TupleDesc out_desc, Emit emit, void *arg, uint64 *count)
{
	Oid namespace_id = get_namespace_oid("pqrun", true);
	Tables tables;
	if (!GoDirect(namespace_id, RowShareLock, &tables, false))
		return false;
	Relation live = tables.live;
	PickLayout layout;
	Relation index = nullptr;
	/* A filtered pickup takes the lanes of its filter where they are
	 * pqrun's, else the pick index as an unfiltered one. */
	bool by_queue = request.filter.queues != nullptr;
	bool lanes = false;
	if (FindLayout(tables, out_desc, &layout)) {
		if (request.filter.job_types != nullptr || request.filter.queues != nullptr)
			lanes = (index = OpenFilterIndex(namespace_id, live, layout, by_queue)) != nullptr;
		if (index == nullptr)
			index = OpenPickIndex(namespace_id, live, layout);
	}
	if (index == nullptr) {
		tables.Close();
		return false;
	}
	/* A statement of its own, as SPI runs the pick: the claims an earlier
	 * pickup of this transaction left unwritten are written first, and a new
	 * snapshot sees them and every earlier write of this transaction. */
	deferred_claims::WriteAll();
	/* What other pickups found of the lanes where there is one pickup hint
	 * (no shards): the queues' job types, and the lanes' hints where nothing
	 * holds jobs back for this pickup only (the controls); as of the hint
	 * generation read before the snapshot, so what becomes READY after it
	 * unsettles them. */
	bool memo = lanes && !citus::InShards();
	bool hinted = memo && !request.gated;
	uint64 gen = memo ? pick_hint::Gen() : 0;
	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	*count = lanes ? LockAndEmitLanes(live, index, by_queue, layout, request, GetActiveSnapshot(), emit, arg, hinted,
	                                  memo, gen)
	               : LockAndEmit(live, index, layout, request, GetActiveSnapshot(), emit, arg);
	PopActiveSnapshot();
	index_close(index, NoLock);
	tables.Close();
	return true;
}

bool
AnyReady(const Request &request, bool *ready)
{
	if (request.filter.job_types == nullptr && request.filter.queues == nullptr)
		return false;
	Oid namespace_id = get_namespace_oid("pqrun", true);
	Tables tables;
	if (!GoDirect(namespace_id, AccessShareLock, &tables, false))
		return false;
	Relation live = tables.live;
	PickLayout layout;
	bool by_queue = request.filter.queues != nullptr;
	Relation index =
	    FindLayout(tables, nullptr, &layout) ? OpenFilterIndex(namespace_id, live, layout, by_queue) : nullptr;
	if (index == nullptr) {
		tables.Close();
		return false;
	}
	bool memo = !citus::InShards();
	uint64 gen = memo ? pick_hint::Gen() : 0; /* before the snapshot, as in Pick */
	PushActiveSnapshot(GetTransactionSnapshot());
	Filter types(request.filter.job_types), queues(request.filter.queues);
	FilterLanes f = OpenLanes(live, index, by_queue, layout, request, types, queues, memo && !request.gated, memo, gen);
	*ready = false;
	for (int i = 0; i < f.count && !*ready; i++)
		*ready = !f.lanes[i].done;
	CloseLanes(&f);
	PopActiveSnapshot();
	index_close(index, NoLock);
	tables.Close();
	return true;
}

/* ---- Lanes ---------------------------------------------------------------- */

struct LaneScan::State {
	Tables tables;
	Relation index;
	PickLayout layout;
	IndexScanDesc keys;  /* index entries only, dead ones too: which keys come next */
	IndexScanDesc lanes; /* one lane's jobs, from a start key on */
	TupleTableSlot *seen;
	TupleTableSlot *locked;
	Request request;
	Filter types;
	Emit emit;
	void *arg;
	const int64 *const *taken; /* the ids this pickup locked so far */
	const int *ntaken;
};

namespace {

enum class LaneSkip { kNo, kNotReady, kOurs, kHeldBack };

/* LaneRow answers whether the row in `slot` is one a lane pick may lock
 * (kNo), and if not, whether it is not READY for anyone (not READY, or
 * delayed), this pickup's already (its own lock does not hide it), or held
 * back for this pickup only (of another type, paused or limited). */
LaneSkip
LaneRow(const LaneScan::State &st, TupleTableSlot *slot)
{
	const PickLayout &l = st.layout;
	bool isnull;
	if (DatumGetObjectId(slot_getattr(slot, l.status, &isnull)) != l.ready ||
	    DatumGetBool(slot_getattr(slot, l.delayed, &isnull)) || (slot_getattr(slot, l.key, &isnull), isnull))
		return LaneSkip::kNotReady;
	Datum job_type = slot_getattr(slot, l.from[kJobType], &isnull);
	if (!st.types.Matches(job_type, l.job_type_collation) ||
	    (st.request.gated && flow_control::Blocked(slot_getattr(slot, l.from[kQueue], &isnull), job_type)))
		return LaneSkip::kHeldBack;
	int64 id = DatumGetInt64(slot_getattr(slot, l.from[kId], &isnull));
	for (int i = 0; i < *st.ntaken; i++)
		if ((*st.taken)[i] == id)
			return LaneSkip::kOurs;
	return LaneSkip::kNo;
}

} // namespace

bool
LaneScan::Open(const Request &request, TupleDesc out_desc, Emit emit, void *arg, const int64 *const *taken,
               const int *ntaken)
{
	Oid namespace_id = get_namespace_oid("pqrun", true);
	auto *st = static_cast<State *>(palloc0(sizeof(State)));
	if (!GoDirect(namespace_id, RowShareLock, &st->tables, false))
		return false;
	if (FindLayout(st->tables, out_desc, &st->layout))
		st->index = OpenLaneIndex(namespace_id, st->tables.live, st->layout);
	if (st->index == nullptr) {
		st->tables.Close();
		return false;
	}
	st->request = request;
	st->types = Filter(request.filter.job_types);
	st->emit = emit;
	st->arg = arg;
	st->taken = taken;
	st->ntaken = ntaken;
	/* As Pick: earlier pickups' claims written, a snapshot that sees them. */
	deferred_claims::WriteAll();
	PushActiveSnapshot(GetTransactionSnapshot());
	CommandCounterIncrement();
	UpdateActiveSnapshotCommandId();
	st->keys = compat::IndexBeginScan(st->tables.live, st->index, GetActiveSnapshot(), 2);
	st->keys->xs_want_itup = true;
	/* The next key is the next entry's, dead or not: a key whose jobs all
	 * ended is only visited for nothing, where skipping killed entries could
	 * walk the whole dead head of the next lane. */
	st->keys->ignore_killed_tuples = false;
	st->lanes = compat::IndexBeginScan(st->tables.live, st->index, GetActiveSnapshot(), 3);
	st->seen = table_slot_create(st->tables.live, nullptr);
	st->locked = table_slot_create(st->tables.live, nullptr);
	state_ = st;
	return true;
}

char *
LaneScan::NextKey(Datum queue, const char *after)
{
	State &st = *state_;
	ScanKeyData keys[2];
	TextKey(&keys[0], 1, BTEqualStrategyNumber, C_COLLATION_OID, queue);
	TextKey(&keys[1], 2, BTGreaterStrategyNumber, C_COLLATION_OID, CStringGetTextDatum(after));
	index_rescan(st.keys, keys, 2, nullptr, 0);
	if (index_getnext_tid(st.keys, ForwardScanDirection) == nullptr)
		return nullptr;
	bool isnull;
	Datum key = index_getattr(st.keys->xs_itup, 2, st.keys->xs_itupdesc, &isnull);
	return isnull ? nullptr : TextDatumGetCString(key);
}

bool
LaneScan::LockOne(Datum queue, Datum key, pick_hint::PickKey start, pick_hint::PickKey *passed, bool *clean)
{
	State &st = *state_;
	ScanKeyData keys[3], members[2];
	TextKey(&keys[0], 1, BTEqualStrategyNumber, C_COLLATION_OID, queue);
	TextKey(&keys[1], 2, BTEqualStrategyNumber, C_COLLATION_OID, key);
	StartKey(start, &keys[2], members);
	for (ScanKeyData &member : members)
		member.sk_attno += 2; /* the lane's (-priority, id) */
	keys[2].sk_attno = 3;
	index_rescan(st.lanes, keys, 3, nullptr, 0);
	CommandId cid = GetCurrentCommandId(true);
	*clean = true;
	*passed = pick_hint::PickKey{INT64_MAX, INT64_MAX};
	bool isnull;
	while (index_getnext_slot(st.lanes, ForwardScanDirection, st.seen)) {
		CHECK_FOR_INTERRUPTS();
		LaneSkip skip = LaneRow(st, st.seen);
		if (skip != LaneSkip::kNo) {
			*clean = *clean && skip != LaneSkip::kHeldBack;
			continue;
		}
		/* Passed over as in LockAndEmit: rows others hold, or that changed. */
		ItemPointerData tid = st.seen->tts_tid;
		TM_FailureData tmfd;
		TM_Result result = table_tuple_lock(st.tables.live, &tid, GetActiveSnapshot(), st.locked, cid,
		                                    LockTupleExclusive, LockWaitSkip, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		if (result == TM_Ok && tmfd.traversed && LaneRow(st, st.locked) != LaneSkip::kNo) {
			/* A newer version that no longer qualifies stays locked (as
			 * LockAndEmit leaves it): it may be READY for others. */
			*clean = false;
		} else if (result == TM_Ok) {
			*passed = pick_hint::KeyOf(DatumGetInt32(slot_getattr(st.locked, st.layout.from[kPriority], &isnull)),
			                      DatumGetInt64(slot_getattr(st.locked, st.layout.from[kId], &isnull)));
			/* A row whose limit filled meanwhile stays locked (as a held row). */
			bool kept = EmitClaim(st.layout, st.request, st.locked, st.emit, st.arg);
			ExecClearTuple(st.locked);
			*clean = *clean && kept;
			return kept;
		}
		ExecClearTuple(st.locked);
	}
	return false;
}

void
LaneScan::Close()
{
	State *st = state_;
	if (st == nullptr)
		return;
	state_ = nullptr;
	ExecDropSingleTupleTableSlot(st->locked);
	ExecDropSingleTupleTableSlot(st->seen);
	index_endscan(st->lanes);
	index_endscan(st->keys);
	PopActiveSnapshot();
	index_close(st->index, NoLock);
	st->tables.Close();
}

} // namespace pqrun::pick_direct
