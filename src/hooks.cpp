/* src/hooks.cpp — every hook and callback pqrun registers, in one place.
 *
 * One function of each kind, registered once by _PG_init, calls the modules
 * in the order written here. No module registers anything itself.
 *
 * Transaction end (RegisterXactCallback):
 *   PRE_COMMIT   1. deferred_claims::WriteAll: the claims a pickup held back
 *                   become rows before anything else looks at the commit.
 *                2. pickup_commit::BeforeCommit: decides on an asynchronous
 *                   commit from the WAL written so far, so after (1), whose
 *                   claims count as the pickup's own.
 *                3. wake::BeforeCommit: NOTIFY, queued before PostgreSQL's
 *                   own pre-commit step sends the transaction's
 *                   notifications (it runs after these callbacks).
 *   PRE_PREPARE  deferred_claims::WriteAll, with direct_rows told that the
 *                transaction prepares (the direct paths stay out of it).
 *   COMMIT, ABORT, PREPARE (and the parallel workers' COMMIT and ABORT):
 *                1. the transaction's pickup state is forgotten
 *                   (direct_rows, citus, pickup_commit, deferred_claims);
 *                2. stats applies or drops its counted changes (and the
 *                   rescues of its maintenance): before (4), so a waiter
 *                   woken by the commit reads counters that include it;
 *                3. flow_control gives back the places of the runs the
 *                   transaction ended (COMMIT) or of the claims it rolled
 *                   back (ABORT); a prepared one keeps both;
 *                4. wake lowers the pickup hint (pick_hint) and wakes
 *                   waiters (after COMMIT), or wakes them for claims that
 *                   rolled back;
 *                5. next_due lowers the next due time to the delayed jobs
 *                   the transaction made (COMMIT), waking a waiter to
 *                   re-time its sleep, or forgets them.
 * Subtransaction end (RegisterSubXactCallback): citus, deferred_claims,
 *   stats, flow_control and wake move what the subtransaction did to its
 *   parent or drop it, in the same order as at transaction end.
 * ExecutorStart_hook: deferred claims are written before a query that reads
 *   pqrun's tables starts (it must see them); after the executor started,
 *   expr_cache fills the compiled CHECK constraints and index predicates of
 *   pqrun's result relations from its cache.
 * planner_hook: before the next planner (Citus's), citus::KeepNullQueueLocal.
 * get_relation_info_hook: after the next one, plan_size keeps the planner's
 *   size of pqrun's tables at 10 pages at least.
 * ProcessUtility_hook: utility.hpp, before and after the command.
 * Relcache invalidation: expr_cache's compiled expressions, direct_rows'
 *   verdict on the job tables, citus's knowledge of them and the installed
 *   version (pg/installed.hpp, after pg_extension's) are forgotten.
 * Shared memory (preloaded only): the request sizes and the LWLocks
 *   (shmem/locks.hpp), and the startup attaches, the database slots
 *   (shmem), the waiters (wake), the queue counters (stats), the places and
 *   buckets of the flow controls (flow_control) and the lanes' hints
 *   (pick_lanes), under AddinShmemInitLock.
 *
 * Each hook enters the modules through GuardedEntry (boundary.hpp); the
 * next hook in the chain, and PostgreSQL's own function, run outside it.
 */
#include "hooks.hpp"
#include "jobs/direct_rows.hpp"
#include "jobs/expr_cache.hpp"
#include "jobs/flow_control.hpp"
#include "jobs/pick_lanes.hpp"
#include "pg/boundary.hpp"
#include "pg/citus.hpp"
#include "pg/installed.hpp"
#include "pg/plan_size.hpp"
#include "shmem/locks.hpp"
#include "shmem/shmem.hpp"
#include "shmem/stats.hpp"
#include "xact/deferred_claims.hpp"
#include "xact/pickup_commit.hpp"
#include "xact/next_due.hpp"
#include "xact/utility.hpp"
#include "xact/wake.hpp"

namespace {

ExecutorStart_hook_type prev_executor_start = nullptr;
ProcessUtility_hook_type prev_process_utility = nullptr;
planner_hook_type prev_planner = nullptr;
get_relation_info_hook_type prev_relation_info = nullptr;
shmem_request_hook_type prev_shmem_request = nullptr;
shmem_startup_hook_type prev_shmem_startup = nullptr;

void
RequestSharedMemory()
{
	using namespace pqrun;
	RequestAddinShmemSpace(
	    add_size(add_size(add_size(add_size(shmem::ShmemSize(), wake::ShmemSize()), stats::ShmemSize()),
	                      flow_control::ShmemSize()),
	             pick_lanes::ShmemSize()));
	RequestNamedLWLockTranche(shmem::kTranche, static_cast<int>(shmem::Lock::kCount));
}

void
AttachSharedMemory()
{
	using namespace pqrun;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shmem::ShmemInit();
	wake::ShmemInit();
	stats::ShmemInit();
	flow_control::ShmemInit();
	pick_lanes::ShmemInit();
	LWLockRelease(AddinShmemInitLock);
}

void
OnXactEvent(XactEvent event)
{
	using namespace pqrun;
	switch (event) {
	case XACT_EVENT_PRE_COMMIT:
		deferred_claims::WriteAll();
		pickup_commit::BeforeCommit();
		wake::BeforeCommit();
		break;
	case XACT_EVENT_PRE_PREPARE:
		direct_rows::PreparingTransaction(true);
		deferred_claims::WriteAll();
		direct_rows::PreparingTransaction(false);
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE:
		direct_rows::PreparingTransaction(false); /* also after a failed pre-prepare */
		citus::AtTransactionEnd();
		pickup_commit::AtEnd();
		deferred_claims::Forget();
		if (event == XACT_EVENT_COMMIT) {
			stats::OnCommit();
			flow_control::AtCommit();
			wake::AtCommit();
			next_due::AtCommit();
		} else if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) {
			stats::OnAbort();
			flow_control::AtAbort();
			wake::AtAbort();
			next_due::Forget();
		} else if (event == XACT_EVENT_PREPARE) {
			/* Its places stay taken: its claims and ends take effect with
			 * it, elsewhere. */
			stats::OnPrepare();
			flow_control::AtPrepare();
			wake::AtPrepare();
			next_due::Forget();
		}
		break;
	default:
		break;
	}
}

void
OnSubXactEvent(SubXactEvent event, SubTransactionId subid, SubTransactionId parent_subid)
{
	using namespace pqrun;
	if (event == SUBXACT_EVENT_COMMIT_SUB) {
		citus::AtSubCommit();
		deferred_claims::AtSubCommit(subid, parent_subid);
		stats::OnSubCommit();
		flow_control::AtSubCommit();
		wake::AtSubCommit();
	} else if (event == SUBXACT_EVENT_ABORT_SUB) {
		citus::AtSubAbort();
		deferred_claims::AtSubAbort(subid);
		stats::OnSubAbort();
		flow_control::AtSubAbort();
		wake::AtSubAbort();
	}
}

} // namespace

extern "C" {

static void
pqrun_xact_callback(XactEvent event, void *)
{
	pqrun::GuardedEntry([=]() { OnXactEvent(event); });
}

static void
pqrun_subxact_callback(SubXactEvent event, SubTransactionId subid, SubTransactionId parent_subid, void *)
{
	pqrun::GuardedEntry([=]() { OnSubXactEvent(event, subid, parent_subid); });
}

static void
pqrun_executor_start(QueryDesc *query_desc, int eflags)
{
	pqrun::GuardedEntry([&]() { pqrun::deferred_claims::WriteBeforeLooking(query_desc); });
	if (prev_executor_start)
		prev_executor_start(query_desc, eflags);
	else
		standard_ExecutorStart(query_desc, eflags);
	pqrun::GuardedEntry([&]() { pqrun::expr_cache::FillQuery(query_desc); });
}

static PlannedStmt *
pqrun_planner(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound)
{
	pqrun::GuardedEntry([&]() { pqrun::citus::KeepNullQueueLocal(parse, bound); });
	if (prev_planner)
		return prev_planner(parse, query_string, cursor_options, bound);
	return standard_planner(parse, query_string, cursor_options, bound);
}

static void
pqrun_relation_info(PlannerInfo *root, Oid relid, bool inhparent, RelOptInfo *rel)
{
	if (prev_relation_info)
		prev_relation_info(root, relid, inhparent, rel);
	pqrun::GuardedEntry([&]() { pqrun::plan_size::OnRelationInfo(relid, inhparent, rel); });
}

static void
pqrun_process_utility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree, ProcessUtilityContext context,
                      ParamListInfo params, QueryEnvironment *query_env, DestReceiver *dest, QueryCompletion *qc)
{
	pqrun::GuardedEntry([&]() { pqrun::utility::Before(pstmt->utilityStmt); });
	if (prev_process_utility)
		prev_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
	else
		standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
	pqrun::GuardedEntry([&]() { pqrun::utility::After(pstmt->utilityStmt); });
}

static void
pqrun_shmem_request(void)
{
	if (prev_shmem_request)
		prev_shmem_request();
	pqrun::GuardedEntry(RequestSharedMemory);
}

static void
pqrun_shmem_startup(void)
{
	if (prev_shmem_startup)
		prev_shmem_startup();
	pqrun::GuardedEntry(AttachSharedMemory);
}

static void
pqrun_relcache_callback(Datum, Oid relid)
{
	pqrun::GuardedEntry([=]() {
		pqrun::expr_cache::OnRelcacheInvalidation(relid);
		pqrun::direct_rows::OnRelcacheInvalidation(relid);
		pqrun::citus::OnRelcacheInvalidation(relid);
		pqrun::installed::OnRelcacheInvalidation(relid);
	});
}
}

namespace pqrun::hooks {

void
Install()
{
	RegisterXactCallback(pqrun_xact_callback, nullptr);
	RegisterSubXactCallback(pqrun_subxact_callback, nullptr);
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = pqrun_executor_start;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = pqrun_process_utility;
	prev_planner = planner_hook;
	planner_hook = pqrun_planner;
	prev_relation_info = get_relation_info_hook;
	get_relation_info_hook = pqrun_relation_info;
	CacheRegisterRelcacheCallback(pqrun_relcache_callback, Datum(0));
}

void
InstallSharedMemory()
{
	prev_shmem_request = shmem_request_hook;
	shmem_request_hook = pqrun_shmem_request;
	prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = pqrun_shmem_startup;
}

} // namespace pqrun::hooks
