/* src/pickup_commit.cpp — asynchronous commit of claim-only transactions.
 *
 * Its transaction callback is also where deferred claims (deferred_claims.hpp)
 * are written before commit or prepare and forgotten after.
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
#include "pickup_commit.hpp"

#include "boundary.hpp"
#include "deferred_claims.hpp"
#include "direct_rows.hpp"
#include "guc.hpp"

namespace pqrun::pickup_commit {

namespace {

/* Where the last claim-only pickup's WAL ended; InvalidXLogRecPtr when the
 * transaction wrote no WAL that way or wrote something else first. */
XLogRecPtr claims_end = InvalidXLogRecPtr;

void
OnXactEvent(XactEvent event)
{
	switch (event) {
	case XACT_EVENT_PRE_COMMIT:
		/* Deferred claims are claims: written here, they keep claims_end
		 * current, and the test below still holds for them. */
		deferred_claims::WriteAll();
		if (claims_end != InvalidXLogRecPtr && XactLastRecEnd == claims_end &&
		    !pqrun_synchronous_pickup && synchronous_commit > SYNCHRONOUS_COMMIT_OFF)
			(void)set_config_option("synchronous_commit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0,
			                        false);
		break;
	case XACT_EVENT_PRE_PREPARE:
		direct_rows::PreparingTransaction(true);
		deferred_claims::WriteAll();
		direct_rows::PreparingTransaction(false);
		break;
	case XACT_EVENT_COMMIT:
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_COMMIT:
	case XACT_EVENT_PARALLEL_ABORT:
	case XACT_EVENT_PREPARE:
		direct_rows::PreparingTransaction(false); /* also after a failed pre-prepare */
		claims_end = InvalidXLogRecPtr;
		deferred_claims::Forget();
		break;
	default:
		break;
	}
}

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
InstallCallbacks()
{
	RegisterXactCallback([](XactEvent event, void *) { GuardedEntry([=]() { OnXactEvent(event); }); }, nullptr);
}

} // namespace pqrun::pickup_commit
