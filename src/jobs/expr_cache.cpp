/* src/jobs/expr_cache.cpp — expression states kept per backend. */
#include "jobs/expr_cache.hpp"

#include "pg/boundary.hpp"

#include <initializer_list>

namespace pqrun::expr_cache {

namespace {

/* What an entry keeps of the relation or index `oid`. */
enum class Kind { kChecks, kPredicate, kDefaults };

struct Key {
	Oid oid;
	Kind kind;
};

/* The compiled states of one relation's CHECK constraints (in the order of
 * its relcache entry) or column defaults (by attribute number, nullptr for
 * a column with none), or of one index's predicate; `states` is nullptr
 * when they may not be kept. */
struct Entry {
	Key key; /* hash key */
	MemoryContext context;
	int count;
	ExprState **states;
};

HTAB *entries = nullptr;

bool
CallsNonBuiltin(Node *node, void *)
{
	if (node == nullptr)
		return false;
	/* Domain checks and sublinks reach beyond the expression itself. */
	if (IsA(node, CoerceToDomain) || IsA(node, SubLink) || IsA(node, SubPlan))
		return true;
	if (check_functions_in_node(
	        node, [](Oid fn, void *) { return fn >= FirstGenbkiObjectId; }, nullptr))
		return true;
	/* PG15 declares the walker without arguments; void (*)() is the cast
	 * that says so on purpose. */
	return expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(CallsNonBuiltin)),
	                              nullptr);
}

/* Compile gives `entry` the states of `exprs` (one qual of all of them when
 * `as_qual`), compiled in a new context that outlives the transaction, or
 * none when any may not be kept (CallsNonBuiltin). */
void
Compile(Entry *entry, List *exprs, bool as_qual)
{
	entry->context = nullptr;
	entry->states = nullptr;
	entry->count = as_qual ? 1 : list_length(exprs);
	if (CallsNonBuiltin(reinterpret_cast<Node *>(exprs), nullptr))
		return;
	/* Built under the caller's context, so that an error frees it. */
	MemoryContext context = AllocSetContextCreate(CurrentMemoryContext, "pqrun kept expressions", ALLOCSET_SMALL_SIZES);
	MemoryContext old = MemoryContextSwitchTo(context);
	auto **states = static_cast<ExprState **>(palloc(sizeof(ExprState *) * entry->count));
	if (as_qual) {
		states[0] = ExecInitQual(
		    reinterpret_cast<List *>(expression_planner(static_cast<Expr *>(copyObjectImpl(exprs)))), nullptr);
	} else {
		int i = 0;
		ListCell *lc;
		foreach (lc, exprs) {
			auto *expr = static_cast<Expr *>(lfirst(lc));
			states[i++] =
			    expr ? ExecInitExpr(expression_planner(static_cast<Expr *>(copyObjectImpl(expr))), nullptr) : nullptr;
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextSetParent(context, CacheMemoryContext);
	entry->context = context;
	entry->states = states;
}

/* Find answers the entry of `key`, compiling `exprs` when there is none. */
template <typename Exprs>
Entry *
Find(Key key, Exprs exprs)
{
	if (entries == nullptr) {
		HASHCTL ctl{};
		ctl.keysize = sizeof(Key);
		ctl.entrysize = sizeof(Entry);
		ctl.hcxt = CacheMemoryContext;
		entries = hash_create("pqrun kept expressions", 32, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	bool found;
	auto *entry = static_cast<Entry *>(hash_search(entries, &key, HASH_FIND, &found));
	if (found)
		return entry;
	Entry compiled{key, nullptr, 0, nullptr};
	Compile(&compiled, exprs(), key.kind == Kind::kPredicate);
	entry = static_cast<Entry *>(hash_search(entries, &key, HASH_ENTER, &found));
	*entry = compiled;
	return entry;
}

/* Drop forgets `entry`'s states; a statement of this transaction may still
 * hold them, so they are freed with the transaction. */
void
Drop(Entry *entry)
{
	if (entry->context == nullptr)
		return;
	if (TopTransactionContext != nullptr)
		MemoryContextSetParent(entry->context, TopTransactionContext);
	else
		MemoryContextDelete(entry->context);
	entry->context = nullptr;
}

/* FillChecks gives `info` the kept states of its relation's CHECK
 * constraints. */
void
FillChecks(ResultRelInfo *info)
{
	Relation rel = info->ri_RelationDesc;
	TupleConstr *constr = rel->rd_att->constr;
	if (compat::CheckConstraintExprs(info) != nullptr || constr == nullptr || constr->num_check == 0 ||
	    constr->num_check != rel->rd_rel->relchecks)
		return;
	Entry *entry = Find({RelationGetRelid(rel), Kind::kChecks}, [&]() {
		List *exprs = NIL;
		for (int i = 0; i < constr->num_check; i++)
			exprs = lappend(exprs,
			                compat::CheckEnforced(constr->check[i]) ? stringToNode(constr->check[i].ccbin) : nullptr);
		return exprs;
	});
	if (entry->states != nullptr && entry->count == constr->num_check)
		compat::CheckConstraintExprs(info) = entry->states;
}

/* FillPredicates gives `info`'s partial indexes their kept predicate states. */
void
FillPredicates(ResultRelInfo *info)
{
	for (int i = 0; i < info->ri_NumIndices; i++) {
		IndexInfo *index_info = info->ri_IndexRelationInfo[i];
		if (index_info == nullptr || index_info->ii_Predicate == NIL || index_info->ii_PredicateState != nullptr)
			continue;
		Entry *entry = Find({RelationGetRelid(info->ri_IndexRelationDescs[i]), Kind::kPredicate},
		                    [&]() { return index_info->ii_Predicate; });
		if (entry->states != nullptr)
			index_info->ii_PredicateState = entry->states[0];
	}
}

} // namespace

void
OnRelcacheInvalidation(Oid relid)
{
	if (entries == nullptr)
		return;
	if (OidIsValid(relid)) {
		for (Kind kind : {Kind::kChecks, Kind::kPredicate, Kind::kDefaults}) {
			Key key{relid, kind};
			auto *entry = static_cast<Entry *>(hash_search(entries, &key, HASH_FIND, nullptr));
			if (entry != nullptr) {
				Drop(entry);
				hash_search(entries, &key, HASH_REMOVE, nullptr);
			}
		}
		return;
	}
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	while (auto *entry = static_cast<Entry *>(hash_seq_search(&scan))) {
		Drop(entry);
		hash_search(entries, &entry->key, HASH_REMOVE, nullptr);
	}
}

/* FillQuery fills the result relations in pqrun's schema of a query that
 * has just started. */
void
FillQuery(QueryDesc *query_desc)
{
	EState *estate = query_desc->estate;
	if (estate == nullptr || estate->es_opened_result_relations == NIL)
		return;
	Oid namespace_id = InvalidOid;
	ListCell *lc;
	foreach (lc, estate->es_opened_result_relations) {
		auto *info = static_cast<ResultRelInfo *>(lfirst(lc));
		if (!OidIsValid(namespace_id))
			namespace_id = get_namespace_oid("pqrun", true);
		if (OidIsValid(namespace_id) && RelationGetNamespace(info->ri_RelationDesc) == namespace_id)
			Fill(info);
	}
}

void
Fill(ResultRelInfo *info)
{
	FillChecks(info);
	FillPredicates(info);
}

ExprState *const *
Defaults(Relation rel)
{
	TupleDesc desc = RelationGetDescr(rel);
	Entry *entry = Find({RelationGetRelid(rel), Kind::kDefaults}, [&]() {
		List *exprs = NIL;
		for (int i = 0; i < desc->natts; i++)
			exprs = lappend(exprs, TupleDescAttr(desc, i)->attisdropped ? nullptr : build_column_default(rel, i + 1));
		return exprs;
	});
	return entry->count == desc->natts ? entry->states : nullptr;
}

} // namespace pqrun::expr_cache
