/* src/xact/pick_hint.cpp — the pickup hint (pick_hint.hpp).
 *
 * The transaction's own keys are in static variables, reset at its end.
 */
#include "xact/pick_hint.hpp"

#include "shmem/shmem.hpp"

namespace pqrun::pick_hint {

namespace {

/* Smallest pickup keys this transaction made READY (lowered into the hint at
 * COMMIT) and left READY while locking or claiming them (lowered at ABORT,
 * and at COMMIT for rows it only held). */
constexpr PickKey kNoKey{INT64_MAX, INT64_MAX};
PickKey ready_key = kNoKey;
PickKey held_key = kNoKey;
PickKey claimed_key = kNoKey;

void
KeepMin(PickKey *into, PickKey key)
{
	if (Less(key, *into))
		*into = key;
}

/* NoteLowered records that generation `gen` made READY a job as low as
 * `key`. */
void
NoteLowered(DatabaseState &state, PickKey key)
{
	int at = static_cast<int>(state.hint_gen % DatabaseState::kLowered);
	state.lowered_neg_priority[at] = key.neg_priority;
	state.lowered_id[at] = key.id;
}

/* LowerIn lowers the hint of `state` to `key`, moving its generation. */
void
LowerIn(DatabaseState &state, PickKey key)
{
	state.hint_gen++;
	NoteLowered(state, key);
	PickKey current{state.hint_neg_priority, state.hint_id};
	if (state.hint_set && Less(key, current)) {
		state.hint_neg_priority = key.neg_priority;
		state.hint_id = key.id;
	}
}

void
LowerTo(PickKey key)
{
	if (Less(key, kNoKey))
		Lower(key);
}

} // namespace

PickKey
KeyOf(int32 priority, int64 id)
{
	return PickKey{-static_cast<int64>(priority), id};
}

void
NoteReady(PickKey key)
{
	KeepMin(&ready_key, key);
}

void
NoteHeld(PickKey key)
{
	KeepMin(&held_key, key);
}

void
NoteClaimed(PickKey key)
{
	KeepMin(&claimed_key, key);
}

bool
Read(PickKey *key, uint64 *gen)
{
	bool found = shmem::ReadMySlot([key, gen](const shmem::DatabaseSlot &slot) {
		*gen = slot.wake.hint_gen;
		if (slot.wake.hint_set)
			*key = PickKey{slot.wake.hint_neg_priority, slot.wake.hint_id};
	});
	/* What this transaction made READY is lowered into the hint only at
	 * COMMIT, but it may pick it up itself before that. */
	KeepMin(key, ready_key);
	KeepMin(key, held_key);
	return found;
}

void
Raise(uint64 gen, PickKey key)
{
	shmem::UpdateMySlot([gen, key](shmem::DatabaseSlot &slot) {
		PickKey current{slot.wake.hint_neg_priority, slot.wake.hint_id};
		if (slot.wake.hint_gen == gen && (!slot.wake.hint_set || Less(current, key))) {
			slot.wake.hint_neg_priority = key.neg_priority;
			slot.wake.hint_id = key.id;
			slot.wake.hint_set = true;
		}
	});
}

void
Lower(PickKey key)
{
	shmem::UpdateMySlot([key](shmem::DatabaseSlot &slot) { LowerIn(slot.wake, key); });
}

uint64
Gen()
{
	uint64 gen = 0;
	(void)shmem::ReadMySlot([&gen](const shmem::DatabaseSlot &slot) { gen = slot.wake.hint_gen; });
	return gen;
}

bool
NothingReadyBelow(PickKey key, uint64 gen)
{
	/* This transaction's own claims are not READY for it, whatever their keys. */
	if (shmem::Shared() == nullptr || Less(ready_key, key) || Less(held_key, key))
		return false;
	bool nothing = false;
	(void)shmem::ReadMySlot([key, gen, &nothing](const shmem::DatabaseSlot &slot) {
		const DatabaseState &state = slot.wake;
		nothing = state.hint_gen >= gen && state.hint_gen - gen <= static_cast<uint64>(DatabaseState::kLowered);
		for (uint64 g = gen + 1; nothing && g <= state.hint_gen; g++) {
			int at = static_cast<int>(g % DatabaseState::kLowered);
			nothing = !Less(PickKey{state.lowered_neg_priority[at], state.lowered_id[at]}, key);
		}
	});
	return nothing;
}

void
ResetIn(DatabaseState &state)
{
	state.hint_set = false;
	state.hint_gen++;
	NoteLowered(state, PickKey{INT64_MIN, INT64_MIN});
}

bool
CommitPending()
{
	KeepMin(&ready_key, held_key);
	return Less(ready_key, kNoKey);
}

void
LowerAtCommit(DatabaseState &state)
{
	LowerIn(state, ready_key);
}

void
AtAbort()
{
	/* Claims and locks roll back: those rows are READY again. */
	KeepMin(&claimed_key, held_key);
	LowerTo(claimed_key);
}

/* A rolled-back subtransaction makes its claims READY again right away. */
void
AtSubAbort()
{
	PickKey lowest = claimed_key;
	KeepMin(&lowest, held_key);
	LowerTo(lowest);
}

void
AtPrepare()
{
	/* A prepared transaction commits or aborts elsewhere, later: keep the
	 * hint from ever passing what it touched. */
	KeepMin(&ready_key, held_key);
	KeepMin(&ready_key, claimed_key);
	LowerTo(ready_key);
}

void
Forget()
{
	ready_key = held_key = claimed_key = kNoKey;
}

} // namespace pqrun::pick_hint
