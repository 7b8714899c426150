/* src/xact/pick_hint.hpp — the pickup hint of a database: where pickups
 * start in the pick index, past its dead head.
 *
 * No READY job has a pickup key below the hint. Pickups that found nothing
 * below a key raise it (unfiltered ones) and every commit that makes a job
 * READY lowers it, each move counted in its generation; the lanes keep
 * hints of their own that hold while no job became READY below them. It
 * lives in the database's slot of shared memory (shmem/wake_state.hpp),
 * moved by the commit in wake.cpp's one update of the slot.
 */
#pragma once

#include "pg/pg.hpp"
#include "shmem/wake_state.hpp"

namespace pqrun::pick_hint {

using wake::DatabaseState;

/* Pickup keys: the order of pickup, (-priority, id), ascending. */
struct PickKey {
	int64 neg_priority;
	int64 id;
};
PickKey KeyOf(int32 priority, int64 id);
/* Less answers whether `a` is picked up before `b`. */
inline bool
Less(const PickKey &a, const PickKey &b)
{
	return a.neg_priority < b.neg_priority || (a.neg_priority == b.neg_priority && a.id < b.id);
}

/* NoteReady records that a job with pickup key `key` became READY in the
 * current transaction; NoteHeld a READY row it locked without claiming it
 * (pickups skip it meanwhile); NoteClaimed a row it claimed (READY again if
 * the transaction, or the subtransaction it was claimed in, rolls back). */
void NoteReady(PickKey key);
void NoteHeld(PickKey key);
void NoteClaimed(PickKey key);

/* Read sets *key to the hint (left alone while none is set) and *gen to
 * its generation, and answers false when the database has no shared state
 * at all. Raise moves it up to `key` after an unfiltered pickup that began
 * with generation `gen`, unless a job became READY since. Lower moves it
 * down to `key` now. */
bool Read(PickKey *key, uint64 *gen);
void Raise(uint64 gen, PickKey key);
void Lower(PickKey key);

/* For the lanes' own hints (pick_lanes.cpp), which start a lane's scan
 * past its dead head as the pickup hint does for the pick index: Gen
 * answers the database's hint generation now (0 without shared state);
 * NothingReadyBelow answers whether no job became READY with a pickup key
 * below `key` since generation `gen`, this transaction's own included
 * (false when that is too long ago to tell). */
uint64 Gen();
bool NothingReadyBelow(PickKey key, uint64 gen);

/* ResetIn forgets the hint of `state` (CREATE EXTENSION: new tables, whose
 * ids start again at 1). */
void ResetIn(DatabaseState &state);

/* The end of the transaction (wake.cpp, which moves the slot once):
 * CommitPending answers whether the commit lowers the hint, LowerAtCommit
 * lowers it in `state` (slot lock held), before any waiter is woken, so the
 * woken look low enough; AtAbort, AtSubAbort and AtPrepare lower it for
 * what rolled back or may; Forget drops the transaction's keys. */
bool CommitPending();
void LowerAtCommit(DatabaseState &state);
void AtAbort();
void AtSubAbort();
void AtPrepare();
void Forget();

} // namespace pqrun::pick_hint
