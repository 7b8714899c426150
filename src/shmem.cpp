/* src/shmem.cpp — shared memory hooks and the database slot table.
 *
 * One LWLock guards the whole table: it is touched once per worker round at
 * most, so contention is not a concern.
 */
#include "shmem.hpp"

#include "boundary.hpp"
#include "stats.hpp"
#include "wake.hpp"

namespace pqrun::shmem {

namespace {

/* The wait event of a DROP DATABASE waiting for the maintenance worker to leave (compat::ExtensionWaitEvent). */
uint32 step_aside_wait_event = 0;

SharedState *shared = nullptr;
shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;

constexpr int kStepAsideWaitMs = 5000;
constexpr int kStepAsideRetryMs = 10000;

void
RequestSpace()
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(add_size(add_size(MAXALIGN(sizeof(SharedState)), wake::ShmemSize()), stats::ShmemSize()));
	RequestNamedLWLockTranche("pqrun", 3);
}

void
Startup()
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	bool found;
	shared = static_cast<SharedState *>(ShmemInitStruct("pqrun", sizeof(SharedState), &found));
	if (!found) {
		memset(shared, 0, sizeof(SharedState));
		shared->lock = &(GetNamedLWLockTranche("pqrun"))->lock;
	}
	wake::ShmemInit();
	stats::ShmemInit();
	LWLockRelease(AddinShmemInitLock);
}

} // namespace

} // namespace pqrun::shmem

extern "C" {
static void
pqrun_shmem_request(void)
{
	pqrun::GuardedEntry(pqrun::shmem::RequestSpace);
}
static void
pqrun_shmem_startup(void)
{
	pqrun::GuardedEntry(pqrun::shmem::Startup);
}
}

namespace pqrun::shmem {

void
InstallHooks()
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = pqrun_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = pqrun_shmem_startup;
}

SharedState *
Shared()
{
	return shared;
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

} // namespace pqrun::shmem
