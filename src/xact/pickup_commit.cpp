/* src/xact/pickup_commit.cpp — asynchronous commit of claim-only transactions.
 *
 * XactLastRecEnd is the end of the last WAL record this transaction wrote
 * (0 before its first). A pickup that starts with nothing written, or with
 * nothing written since the previous such pickup, remembers where its own WAL
 * ended; an unchanged value at pre-commit means nothing else wrote WAL since.
 * A transaction that took an XID without writing WAL before its first pickup
 * (a temporary or unlogged table) is ruled out too, to stay on the safe side.
 * The commit is then made asynchronous with SET LOCAL synchronous_commit =
 * off, which the end of the transaction undoes.
 */
#include "xact/pickup_commit.hpp"

#include "guc.hpp"
#include "pg/pg.hpp"

namespace pqrun::pickup_commit {

namespace {

/* Where the last claim-only pickup's WAL ended; InvalidXLogRecPtr when the
 * transaction wrote no WAL that way or wrote something else first. */
XLogRecPtr claims_end = InvalidXLogRecPtr;

} // namespace

bool
ClaimsOnlySoFar()
{
	if (XactLastRecEnd == InvalidXLogRecPtr)
		return !TransactionIdIsValid(GetTopTransactionIdIfAny());
	return XactLastRecEnd == claims_end;
}

void
AfterPickup(bool claims_only)
{
	claims_end = claims_only ? XactLastRecEnd : InvalidXLogRecPtr;
}

void
BeforeCommit()
{
	if (claims_end != InvalidXLogRecPtr && XactLastRecEnd == claims_end && !pqrun_synchronous_pickup &&
	    synchronous_commit > SYNCHRONOUS_COMMIT_OFF)
		(void)set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
		                        false);
}

void
AtEnd()
{
	claims_end = InvalidXLogRecPtr;
}

} // namespace pqrun::pickup_commit
