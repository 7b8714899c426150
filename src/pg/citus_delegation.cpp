/* src/pg/citus_delegation.cpp — a call of pqrun's that Citus would
 * delegate by a NULL queue runs where it was made (citus.hpp).
 *
 * Citus delegates `SELECT f(...)` and `SELECT ... FROM f(...)` of a
 * distributed function to the node that holds its distribution argument's
 * shard; Citus 14.0.1 hashes that argument without looking for NULL (a
 * segfault of the backend, a restart of every database of the server: the
 * NULL-key crashes of Citus's tracker, citusdata/citus#3493 and #7242).
 * pqrun's delegated functions take the queue as that argument, and the
 * job-id calls' `queue` is NULL unless given. So before Citus plans such a
 * call, a NULL queue (written, defaulted, a NULL parameter or an
 * expression that folds to NULL) becomes an expression Citus does not
 * delegate (a volatile one, which it cannot evaluate ahead) and that
 * still yields NULL: the call runs on this node, as any call not
 * delegated does.
 */
#include "pg/citus.hpp"

namespace pqrun::citus {

namespace {

/* DelegatedCall answers the function call Citus would consider for
 * delegation in `parse` (citus's TryToDelegateFunctionCall): the one
 * target of a SELECT without FROM, or the one function of its FROM. */
FuncExpr *
DelegatedCall(Query *parse)
{
	if (parse->commandType != CMD_SELECT || parse->jointree == nullptr || parse->jointree->quals != nullptr)
		return nullptr;
	List *from = parse->jointree->fromlist;
	if (from == NIL && list_length(parse->targetList) == 1) {
		auto *entry = static_cast<TargetEntry *>(linitial(parse->targetList));
		return IsA(entry->expr, FuncExpr) ? reinterpret_cast<FuncExpr *>(entry->expr) : nullptr;
	}
	if (list_length(from) != 1 || !IsA(linitial(from), RangeTblRef))
		return nullptr;
	RangeTblEntry *rte = rt_fetch(static_cast<RangeTblRef *>(linitial(from))->rtindex, parse->rtable);
	if (rte->rtekind != RTE_FUNCTION || list_length(rte->functions) != 1)
		return nullptr;
	Node *call = static_cast<RangeTblFunction *>(linitial(rte->functions))->funcexpr;
	return IsA(call, FuncExpr) ? reinterpret_cast<FuncExpr *>(call) : nullptr;
}

/* IsNull answers whether `arg` is NULL by the time Citus looks at it. */
bool
IsNull(Node *arg, ParamListInfo bound)
{
	arg = strip_implicit_coercions(arg);
	if (IsA(arg, Param)) {
		auto *param = reinterpret_cast<Param *>(arg);
		if (param->paramkind != PARAM_EXTERN || bound == nullptr || param->paramid < 1 ||
		    param->paramid > bound->numParams)
			return false; /* Citus plans again with the value */
		ParamExternData workspace;
		ParamExternData *value = bound->paramFetch != nullptr
		                             ? bound->paramFetch(bound, param->paramid, false, &workspace)
		                             : &bound->params[param->paramid - 1];
		return value->isnull;
	}
	if (!IsA(arg, Const))
		arg = eval_const_expressions(nullptr, static_cast<Node *>(copyObjectImpl(arg)));
	return IsA(arg, Const) && reinterpret_cast<Const *>(arg)->constisnull;
}

/* LocalNull is NULL of `type`, volatile: CASE WHEN clock_timestamp() IS NULL THEN
 * <a value> END. */
Node *
LocalNull(Oid type, int32 typmod, Oid collation)
{
	FuncExpr *clock = makeFuncExpr(F_CLOCK_TIMESTAMP, TIMESTAMPTZOID, NIL, InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	NullTest *test = makeNode(NullTest);
	test->arg = reinterpret_cast<Expr *>(clock);
	test->nulltesttype = IS_NULL;
	test->argisrow = false;
	test->location = -1;
	CaseWhen *when = makeNode(CaseWhen);
	when->expr = reinterpret_cast<Expr *>(test);
	when->result = reinterpret_cast<Expr *>(makeNullConst(type, typmod, collation));
	when->location = -1;
	CaseExpr *local = makeNode(CaseExpr);
	local->casetype = type;
	local->casecollid = collation;
	local->args = list_make1(when);
	local->defresult = reinterpret_cast<Expr *>(makeNullConst(type, typmod, collation));
	local->location = -1;
	return reinterpret_cast<Node *>(local);
}

} // namespace

void
KeepNullQueueLocal(Query *parse, ParamListInfo bound)
{
	FuncExpr *call = DelegatedCall(parse);
	if (call == nullptr || get_func_namespace(call->funcid) != get_namespace_oid("pqrun", true) ||
	    !JobTablesDistributed())
		return;
	HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(call->funcid));
	if (!HeapTupleIsValid(tuple))
		return;
	Oid *types;
	char **names;
	char *modes;
	int n = get_func_arg_info(tuple, &types, &names, &modes);
	int queue = -1;
	for (int i = 0; names != nullptr && i < n && queue < 0; i++)
		if (names[i] != nullptr && strcmp(names[i], "queue") == 0 && (modes == nullptr || modes[i] == PROARGMODE_IN))
			queue = i;
	/* All the arguments, in order, defaults included, as the planner will
	 * make them. */
	List *args = queue < 0 ? NIL
	                       : expand_function_arguments(static_cast<List *>(copyObjectImpl(call->args)), false,
	                                                   call->funcresulttype, tuple);
	ReleaseSysCache(tuple);
	if (queue < 0 || queue >= list_length(args) || !IsNull(static_cast<Node *>(list_nth(args, queue)), bound))
		return;
	list_nth_cell(args, queue)->ptr_value = LocalNull(types[queue], -1, DEFAULT_COLLATION_OID);
	call->args = args;
}

} // namespace pqrun::citus
