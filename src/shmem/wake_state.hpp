/* src/shmem/wake_state.hpp — what wake.cpp keeps per database in its slot of
 * shared memory (shmem.hpp): plain data, no behaviour. */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::wake {

struct DatabaseState {
	/* When the earliest delayed job falls due: 0 unknown, DT_NOEND none. */
	TimestampTz next_due;
	/* The pickup hint: no READY job has a pickup key below it, when set. */
	bool hint_set;
	int64 hint_neg_priority;
	int64 hint_id;
	uint64 hint_gen;
	/* The smallest pickup key each of the last kLowered moves of hint_gen
	 * made READY, by the generation it moved to (at gen % kLowered): the
	 * lanes' own hints (pick_lanes.cpp) hold while none is below them. */
	static constexpr int kLowered = 16;
	int64 lowered_neg_priority[kLowered];
	int64 lowered_id[kLowered];
	/* Bumped by every commit that changed pqrun.queue_control (and by
	 * CREATE EXTENSION): backends bring their copy up to date when it
	 * moves. */
	uint64 controls_gen;
	/* Where controls_gen started when the slot was made (a time in
	 * microseconds, so that a copy made under an earlier slot of the
	 * database is never taken for one of this slot's). */
	uint64 controls_gen0;
	/* The queues whose controls the last commits changed, each with the
	 * controls_gen its commit moved to, in a ring written in turn
	 * (changed_next counts the entries ever written): a backend whose copy
	 * is a few generations behind reads only those queues again. An entry
	 * of length -1 stands for every queue (a commit that changed more than
	 * kChangedPerCommit queues, a name longer than kChangedName bytes, a
	 * COMMIT PREPARED, CREATE EXTENSION). */
	static constexpr int kChanged = 256;
	static constexpr int kChangedPerCommit = 8;
	static constexpr int kChangedName = 64;
	uint64 changed_next;
	uint64 changed_gen[kChanged];
	int32 changed_len[kChanged];
	char changed_name[kChanged][kChangedName];
	/* A transaction of the database that changed the controls was
	 * prepared: every COMMIT PREPARED from then on stands for a change of
	 * every queue's (what it changed is not known where it commits). */
	bool prepared_controls;
	/* Moved by every commit (or claim rollback) that made a job of a queue
	 * READY or freed a place in one of its limits, by a hash of the queue
	 * (QueueGen, wake.hpp). */
	static constexpr int kQueueGens = 64;
	uint64 queue_gen[kQueueGens];
};

} // namespace pqrun::wake
