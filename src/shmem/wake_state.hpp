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
	 * CREATE EXTENSION): backends reload their copy when it moves. */
	uint64 controls_gen;
	/* Moved by every commit (or claim rollback) that made a job of a queue
	 * READY or freed a place in one of its limits, by a hash of the queue
	 * (QueueGen, wake.hpp). */
	static constexpr int kQueueGens = 64;
	uint64 queue_gen[kQueueGens];
};

} // namespace pqrun::wake
