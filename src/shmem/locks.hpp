/* src/shmem/locks.hpp — the LWLocks of pqrun's shared memory, by name.
 *
 * One named tranche ("pqrun") holds them all; hooks.cpp asks for kCount of
 * them, and each table's ShmemInit takes its own by LockOf.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::shmem {

enum class Lock : int {
	kSlots,    /* the database slots (shmem.cpp) */
	kWaiters,  /* the waiting pickups (xact/wake.cpp) */
	kCounters, /* the queue counters (stats.cpp) */
	kPlaces,   /* the flow controls' counters, places and key buckets (jobs/flow_control.cpp) */
	kCount
};

constexpr const char *kTranche = "pqrun";

/* LockOf answers lock `lock` of the tranche; only while shared memory is
 * attached (a ShmemInit). */
inline LWLock *
LockOf(Lock lock)
{
	return &GetNamedLWLockTranche(kTranche)[static_cast<int>(lock)].lock;
}

} // namespace pqrun::shmem
