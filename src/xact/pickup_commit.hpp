/* src/xact/pickup_commit.hpp — asynchronous commit of claim-only transactions.
 *
 * A transaction that did nothing but pick up jobs commits asynchronously
 * unless pqrun.synchronous_pickup is on: it saves one of the two WAL flushes
 * an unbatched job costs. Losing such a claim in a crash changes nothing a
 * worker can rely on: after a crash every RUNNING job's holder is gone and
 * orphan rescue makes it READY anyway. Any other write in the transaction,
 * before or after the pickup, keeps the commit synchronous.
 */
#pragma once

namespace pqrun::pickup_commit {

/* ClaimsOnlySoFar answers, before a pickup claims, whether the current
 * transaction has written nothing but earlier pickups' claims. */
bool ClaimsOnlySoFar();

/* AfterPickup records where the pickup's WAL ended when the transaction
 * wrote nothing else before it (`claims_only`, from ClaimsOnlySoFar). */
void AfterPickup(bool claims_only);

/* BeforeCommit makes the commit asynchronous when the transaction wrote
 * nothing but claims (at pre-commit, after the deferred claims were
 * written: they are claims too); AtEnd forgets the transaction. */
void BeforeCommit();
void AtEnd();

} // namespace pqrun::pickup_commit
