/* src/shmem/shmem.cpp — the database slot table in shared memory.
 *
 * One LWLock guards the whole table: it is touched once per worker round at
 * most, so contention is not a concern.
 */
#include "shmem/shmem.hpp"

#include "shmem/locks.hpp"

namespace pqrun::shmem {

namespace {

/* The wait event of a DROP DATABASE waiting for the maintenance worker to leave (compat::ExtensionWaitEvent). */
uint32 step_aside_wait_event = 0;

SharedState *shared = nullptr;

constexpr int kStepAsideWaitMs = 5000;
constexpr int kStepAsideRetryMs = 10000;

} // namespace

Size
ShmemSize()
{
	return MAXALIGN(sizeof(SharedState));
}

void
ShmemInit()
{
	bool found;
	shared = static_cast<SharedState *>(ShmemInitStruct("pqrun", sizeof(SharedState), &found));
	if (!found) {
		memset(shared, 0, sizeof(SharedState));
		shared->lock = LockOf(Lock::kSlots);
	}
}

SharedState *
Shared()
{
	return shared;
}

DatabaseSlot *
MySlot(SharedState *state)
{
	for (DatabaseSlot &s : state->slots)
		if (s.state != SlotState::kFree && s.dboid == MyDatabaseId)
			return &s;
	return nullptr;
}

void
WakeLauncher()
{
	if (shared && shared->launcher_latch)
		SetLatch(shared->launcher_latch);
}

void
RegisterDatabase(Oid dboid, int grace_ms)
{
	if (shared == nullptr)
		return;
	TimestampTz now = GetCurrentTimestamp();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	DatabaseSlot *slot = nullptr;
	for (DatabaseSlot &s : shared->slots)
		if (s.state != SlotState::kFree && s.dboid == dboid)
			slot = &s;
	for (DatabaseSlot &s : shared->slots)
		if (slot == nullptr && s.state == SlotState::kFree)
			slot = &s;
	if (slot == nullptr) {
		shared->reprobe_epoch++;
	} else {
		if (slot->state != SlotState::kRunning && slot->state != SlotState::kStarting) {
			/* A slot taken for another database starts its counts over. */
			if (slot->state == SlotState::kFree && slot->dboid != dboid)
				slot->rescued = Rescues{};
			slot->dboid = dboid;
			slot->state = SlotState::kProbe;
			slot->retry_at = now;
		}
		/* A worker already running (a probe, or one that saw a DROP
		 * EXTENSION) waits for this registration's transaction too. */
		slot->grace_until = TimestampTzPlusMilliseconds(now, grace_ms);
		slot->registrations++;
	}
	LWLockRelease(shared->lock);
	if (slot == nullptr)
		ereport(WARNING, (errmsg("pqrun: all %d database slots are taken", kMaxDatabases),
		                  errdetail("The maintenance worker of this database starts when a slot frees up.")));
	WakeLauncher();
}

void
StepAside(Oid dboid)
{
	if (shared == nullptr || !OidIsValid(dboid))
		return;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kStepAsideWaitMs);
	for (;;) {
		bool waiting = false;
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (DatabaseSlot &s : shared->slots) {
			if (s.state == SlotState::kFree || s.dboid != dboid)
				continue;
			if (s.state == SlotState::kRunning || s.state == SlotState::kStarting || s.state == SlotState::kProbe) {
				s.state = SlotState::kStepAside;
				if (s.latch)
					SetLatch(s.latch);
			}
			s.retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kStepAsideRetryMs);
			waiting = waiting || s.pid != 0;
		}
		LWLockRelease(shared->lock);
		if (!waiting || GetCurrentTimestamp() >= deadline)
			return;
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10,
		                compat::ExtensionWaitEvent(step_aside_wait_event, "PqrunStepAside"));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

void
AddRescues(Oid dboid, const Rescues &more)
{
	if (shared == nullptr || (more.stale == 0 && more.orphaned == 0))
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (DatabaseSlot &s : shared->slots)
		if (s.state != SlotState::kFree && s.dboid == dboid) {
			s.rescued.stale += more.stale;
			s.rescued.orphaned += more.orphaned;
		}
	LWLockRelease(shared->lock);
}

bool
RescuesOf(Oid dboid, Rescues *out)
{
	bool found = false;
	if (shared == nullptr)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const DatabaseSlot &s : shared->slots)
		if (s.state != SlotState::kFree && s.dboid == dboid) {
			*out = s.rescued;
			found = true;
		}
	LWLockRelease(shared->lock);
	return found;
}

TableUsage
DatabasesUsage()
{
	TableUsage usage{"databases", 0, kMaxDatabases};
	if (shared == nullptr)
		return usage;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const DatabaseSlot &s : shared->slots)
		usage.used += s.state != SlotState::kFree;
	LWLockRelease(shared->lock);
	return usage;
}

} // namespace pqrun::shmem
