/* src/utility_hook.cpp — what pqrun does before a utility command.
 *
 * Deferred claims are written first (deferred_claims.hpp): COPY ... TO and
 * other commands read tables without an executor. Transaction control is
 * left alone: COMMIT and PREPARE write them through the transaction
 * callback, and a rollback or an aborted transaction must not run
 * statements.
 *
 * COMMIT PREPARED and ROLLBACK PREPARED end a transaction whose commit
 * callbacks ran nowhere: waiters are woken and counters recounted after them.
 *
 * DROP DATABASE (without FORCE), ALTER DATABASE ... RENAME and CREATE
 * DATABASE ... TEMPLATE fail while any other backend is connected to the
 * database. Before running them, this hook asks pqrun's worker there to exit
 * and waits for it (only with shared memory, that is when preloaded); the
 * launcher comes back later if the database remains.
 */
#include "boundary.hpp"
#include "deferred_claims.hpp"
#include "shmem.hpp"
#include "utility_hook.hpp"
#include "wake.hpp"

extern "C" {
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
}

namespace pqrun {

namespace {

ProcessUtility_hook_type prev_process_utility = nullptr;

/* DatabaseNeedingExclusivity answers the database that `stmt` needs alone,
 * or InvalidOid. */
Oid
DatabaseNeedingExclusivity(Node *stmt)
{
	const char *name = nullptr;
	if (IsA(stmt, DropdbStmt)) {
		name = castNode(DropdbStmt, stmt)->dbname;
	} else if (IsA(stmt, RenameStmt) && castNode(RenameStmt, stmt)->renameType == OBJECT_DATABASE) {
		name = castNode(RenameStmt, stmt)->subname;
	} else if (IsA(stmt, CreatedbStmt)) {
		ListCell *lc;
		foreach (lc, castNode(CreatedbStmt, stmt)->options) {
			DefElem *option = lfirst_node(DefElem, lc);
			if (strcmp(option->defname, "template") == 0)
				name = defGetString(option);
		}
	}
	return name ? get_database_oid(name, true) : InvalidOid;
}

void
ProcessUtility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree, ProcessUtilityContext context,
               ParamListInfo params, QueryEnvironment *query_env, DestReceiver *dest, QueryCompletion *qc)
{
	if (!IsA(pstmt->utilityStmt, TransactionStmt) && !IsAbortedTransactionBlockState())
		deferred_claims::WriteAll();
	shmem::StepAside(DatabaseNeedingExclusivity(pstmt->utilityStmt));
	if (prev_process_utility)
		prev_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
	else
		standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
	if (IsA(pstmt->utilityStmt, TransactionStmt)) {
		TransactionStmtKind kind = castNode(TransactionStmt, pstmt->utilityStmt)->kind;
		if (kind == TRANS_STMT_COMMIT_PREPARED || kind == TRANS_STMT_ROLLBACK_PREPARED)
			wake::AfterPreparedEnded();
	}
}

} // namespace

} // namespace pqrun

extern "C" {
static void
pqrun_process_utility(PlannedStmt *pstmt, const char *query_string, bool read_only_tree,
                      ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *query_env,
                      DestReceiver *dest, QueryCompletion *qc)
{
	pqrun::GuardedEntry([&]() { pqrun::ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc); });
}
}

namespace pqrun {

void
InstallUtilityHook()
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = pqrun_process_utility;
}

} // namespace pqrun
