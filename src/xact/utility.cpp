/* src/xact/utility.cpp — what pqrun does around a utility command (called by the
 * ProcessUtility hook in hooks.cpp).
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
 *
 * CREATE, ALTER and DROP EXTENSION pqrun change the installed version:
 * every backend reads it again after the commit (pg/installed.hpp).
 */
#include "xact/utility.hpp"

#include "pg/installed.hpp"
#include "shmem/shmem.hpp"
#include "xact/deferred_claims.hpp"
#include "xact/wake.hpp"

namespace pqrun::utility {

namespace {

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

/* ChangesPqrun answers whether `stmt` creates, updates or drops the
 * extension pqrun. */
bool
ChangesPqrun(Node *stmt)
{
	if (IsA(stmt, CreateExtensionStmt))
		return strcmp(castNode(CreateExtensionStmt, stmt)->extname, "pqrun") == 0;
	if (IsA(stmt, AlterExtensionStmt))
		return strcmp(castNode(AlterExtensionStmt, stmt)->extname, "pqrun") == 0;
	if (IsA(stmt, DropStmt) && castNode(DropStmt, stmt)->removeType == OBJECT_EXTENSION) {
		ListCell *lc;
		foreach (lc, castNode(DropStmt, stmt)->objects)
			if (strcmp(strVal(lfirst(lc)), "pqrun") == 0)
				return true;
	}
	return false;
}

} // namespace

void
Before(Node *stmt)
{
	if (!IsA(stmt, TransactionStmt) && !IsAbortedTransactionBlockState())
		deferred_claims::WriteAll();
	shmem::StepAside(DatabaseNeedingExclusivity(stmt));
}

void
After(Node *stmt)
{
	if (ChangesPqrun(stmt))
		installed::Changed();
	if (IsA(stmt, TransactionStmt)) {
		TransactionStmtKind kind = castNode(TransactionStmt, stmt)->kind;
		if (kind == TRANS_STMT_COMMIT_PREPARED || kind == TRANS_STMT_ROLLBACK_PREPARED)
			wake::AfterPreparedEnded();
	}
}

} // namespace pqrun::utility
