/* src/shmem/shmem.hpp — pqrun's shared memory: the launcher and one slot per
 * database that has (or may have) a maintenance worker.
 *
 * Exists only when pqrun is in shared_preload_libraries; Shared() answers
 * nullptr otherwise and every caller must cope with that.
 */
#pragma once

#include "pg/pg.hpp"
#include "shmem/wake_state.hpp"

namespace pqrun::shmem {

constexpr int kMaxDatabases = 64;

/* Lifecycle of a database slot (docs/operations.md, "Background workers"):
 *   kProbe      → the launcher should start a worker (at or after retry_at)
 *   kStarting   → registered with the postmaster, not yet running
 *   kRunning    → the worker is in its loop
 *   kAbsent     → the worker found no pqrun in the database and left; the
 *                 launcher remembers the database and frees the slot
 *   kStepAside  → asked to leave (DROP DATABASE & co); probed again later
 */
enum class SlotState : uint8 { kFree, kProbe, kStarting, kRunning, kAbsent, kStepAside };

/* Where the maintenance rounds' looks at BLOCKED and RUNNING jobs and at
 * dependency edges of a database go on (bgw/maintenance.cpp): kept with
 * its slot, so that run_maintenance() and reap_stale() of any session go on
 * from the workers' last round. */
struct RoundCursors {
	int64 blocked_after;
	int64 stale_after;
	int64 orphan_after;
	int64 edges_after;
};

/* RUNNING jobs the maintenance rounds of a database put back since its
 * slot was taken, by why (counters of pqrun.metrics()). */
struct Rescues {
	uint64 stale;    /* their stale window passed */
	uint64 orphaned; /* their holder's session ended */
};

struct DatabaseSlot {
	Oid dboid;
	SlotState state;
	pid_t pid;
	Latch *latch;
	TimestampTz retry_at;     /* kProbe/kStepAside: not before this */
	TimestampTz grace_until;  /* a freshly registered database: wait this long for CREATE EXTENSION to commit */
	uint32 registrations;     /* RegisterDatabase calls, so a running worker notices one */
	wake::DatabaseState wake; /* kept by wake.cpp */
	RoundCursors cursors;
	Rescues rescued;
};

struct SharedState {
	LWLock *lock;
	pid_t launcher_pid;
	Latch *launcher_latch;
	/* Bumped when RegisterDatabase finds no free slot: the launcher then
	 * probes again the databases it had found without pqrun. */
	uint32 reprobe_epoch;
	DatabaseSlot slots[kMaxDatabases];
};

/* ShmemSize / ShmemInit size and attach the slot table; the shared-memory
 * hooks (hooks.cpp) call them with the LWLock tranche "pqrun" requested. */
Size ShmemSize();
void ShmemInit();

/* Shared answers the shared state, or nullptr without preloading. */
SharedState *Shared();

/* MySlot answers this database's slot, nullptr when it has none; caller
 * holds shared->lock. */
DatabaseSlot *MySlot(SharedState *shared);

/* UpdateMySlot runs update(slot) on this database's slot, if it has one,
 * under the exclusive lock; ReadMySlot runs read(slot) under the shared
 * lock and answers whether there was one. */
template <typename Update>
void
UpdateMySlot(Update update)
{
	SharedState *shared = Shared();
	if (shared == nullptr)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (DatabaseSlot *slot = MySlot(shared))
		update(*slot);
	LWLockRelease(shared->lock);
}

template <typename Read>
bool
ReadMySlot(Read read)
{
	SharedState *shared = Shared();
	if (shared == nullptr)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	DatabaseSlot *slot = MySlot(shared);
	if (slot != nullptr)
		read(static_cast<const DatabaseSlot &>(*slot));
	LWLockRelease(shared->lock);
	return slot != nullptr;
}

/* WakeLauncher sets the launcher's latch (if any). Takes no lock. */
void WakeLauncher();

/* RegisterDatabase asks the launcher to start a worker for `dboid` now,
 * allowing `grace_ms` for the registering transaction to commit. */
void RegisterDatabase(Oid dboid, int grace_ms);

/* StepAside asks the worker of `dboid` to exit and waits (up to a few
 * seconds) until it has, so the database can be dropped, renamed or copied. */
void StepAside(Oid dboid);

/* AddRescues counts rescues of `dboid`'s rounds into its slot (none
 * without one); RescuesOf answers them, false when it has no slot. */
void AddRescues(Oid dboid, const Rescues &more);
bool RescuesOf(Oid dboid, Rescues *out);

/* How full a fixed-size table of pqrun's shared memory is, for
 * pqrun.metrics(): a full table makes its users fall back or wait. */
struct TableUsage {
	const char *table;
	int64 used;
	int64 capacity;
};
/* DatabasesUsage: the database slots taken. */
TableUsage DatabasesUsage();

/* Listed answers whether `dboid` is one of the `n` databases of `oids` (the
 * launcher's scan of pg_database). */
inline bool
Listed(const Oid *oids, int n, Oid dboid)
{
	for (int i = 0; i < n; i++)
		if (oids[i] == dboid)
			return true;
	return false;
}

} // namespace pqrun::shmem
