/* src/xact/deferred_claims.hpp — claims written only if they must be.
 *
 * A pickup row-locks the jobs it hands out (FOR UPDATE SKIP LOCKED,
 * which already keeps every other pickup away) and returns them as RUNNING
 * without writing them. The claims are written (the RUNNING versions of the
 * rows) before anything else can look at the jobs: when the transaction
 * commits or prepares, when a query that reads one of pqrun's relations
 * starts in this backend (its snapshot is then moved past the write), and
 * before any utility command. mark_done_batch in the same subtransaction as
 * the pickup, with nothing in between that looked at the queue, finishes such
 * jobs directly, so a job claimed and finished together is written once
 * instead of twice. A rollback of the pickup's (sub)transaction forgets them
 * with their row locks; a rollback of a savepoint below it in which they
 * were written makes them unwritten again.
 */
#pragma once

#include "xact/claims.hpp"

namespace pqrun::deferred_claims {

/* Claims of the last pickup that mark_done_batch may finish directly
 * (their in_fifo is unset), the claim's time and worker (text). */
struct Taken {
	Claims claims;
	TimestampTz at;
	Datum worker;
};

/* ShouldDefer answers whether pickups defer their claims (pqrun.deferred_claims).
 * A waiting pickup defers them from the subtransaction it claims in
 * (pick.cpp), whose commit moves them to the pickup's level. */
bool ShouldDefer();

/* Defer records the claims a pickup just made, at `at` for `worker`. The
 * caller must have run its last statement. They are written below the
 * executor when claim_direct.hpp can, else by an SQL UPDATE. */
void Defer(const Claims &claims, TimestampTz at, const char *worker);

/* WriteAll writes every unwritten claim; a no-op when there is none. Called
 * at pre-commit and pre-prepare and before utility commands (hooks.cpp,
 * utility.cpp). */
void WriteAll();

/* Forget drops what this module knows of the ending transaction. */
void Forget();

/* FinishableIn answers the schema of the unwritten batch mark_done_batch
 * could finish itself (one claimed in the current subtransaction), or
 * InvalidOid when there is none. */
Oid FinishableIn();

/* TakeForFinish takes the deferred claims of jobs in `ids` (with matching
 * `leases` when given) that mark_done_batch can finish itself: outside FIFO
 * groups, claimed in the current subtransaction. The others stay deferred
 * and are written by mark_done_batch's first statement. */
Taken TakeForFinish(int n, const Datum *ids, const Datum *leases);

/* WriteBeforeLooking writes the claims before a query that reads pqrun's
 * tables starts (the executor-start hook, hooks.cpp). */
void WriteBeforeLooking(QueryDesc *query_desc);

/* The end of a subtransaction (hooks.cpp): its claims move to the parent,
 * or go with it. */
void AtSubCommit(SubTransactionId subid, SubTransactionId parent_subid);
void AtSubAbort(SubTransactionId subid);

} // namespace pqrun::deferred_claims
