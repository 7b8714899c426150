/* src/wake.cpp — commit-time NOTIFY and long-poll wake-ups.
 *
 * Local state lives in TopMemoryContext-free static arrays and is reset at
 * the end of every transaction. The shared waiter table is indexed by the
 * waiter's pgprocno; `waiting` counts registered waiters so that a commit
 * with nobody waiting takes no lock at all.
 */
#include "wake.hpp"

#include "boundary.hpp"
#include "guc.hpp"
#include "shmem.hpp"
#include "stats.hpp"

extern "C" {
#include "commands/async.h"
#include "common/hashfn.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
}

namespace pqrun::wake {

namespace {

constexpr int kMaxFilter = 4;
constexpr int kMaxPending = 16;
constexpr const char *kChannel = "pqrun_jobs";

struct Waiter {
	bool in_use;
	bool woken;
	Oid dboid;
	Latch *latch;
	int ntypes; /* 0: any; -1: too many to track, treat as any */
	int nqueues;
	uint32 types[kMaxFilter];
	uint32 queues[kMaxFilter];
};

struct WaiterTable {
	LWLock *lock;
	pg_atomic_uint32 waiting;
	int size;
	Waiter waiters[FLEXIBLE_ARRAY_MEMBER];
};

WaiterTable *table = nullptr;

/* What this transaction made runnable, by (queue, job_type) hash. */
struct Pending {
	uint32 queue;
	uint32 type;
	int64 count;
};
Pending pending[kMaxPending];
int npending = 0;
bool overflow = false;       /* more pairs than tracked: wake everyone */
TimestampTz earliest_delayed = 0;

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

/* MySlot answers this database's slot; caller holds shared->lock. */
shmem::DatabaseSlot *
MySlot(shmem::SharedState *shared)
{
	for (shmem::DatabaseSlot &s : shared->slots)
		if (s.state != shmem::SlotState::kFree && s.dboid == MyDatabaseId)
			return &s;
	return nullptr;
}

/* UpdateMySlot runs update(slot) on this database's slot, if it has one,
 * under the exclusive lock. */
template <typename Update>
void
UpdateMySlot(Update update)
{
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shmem::DatabaseSlot *slot = MySlot(shared))
		update(*slot);
	LWLockRelease(shared->lock);
}

/* Queues already notified in this transaction (NOTIFY also deduplicates,
 * but this keeps batch enqueues from calling it per job). */
uint32 notified[kMaxPending];
int nnotified = 0;

uint32
Hash(const char *s)
{
	return hash_bytes(reinterpret_cast<const unsigned char *>(s), strlen(s));
}

bool
Matches(const Waiter &w, const Pending &p)
{
	bool type_ok = w.ntypes <= 0;
	for (int i = 0; i < w.ntypes && !type_ok; i++)
		type_ok = w.types[i] == p.type;
	bool queue_ok = w.nqueues <= 0;
	for (int i = 0; i < w.nqueues && !queue_ok; i++)
		queue_ok = w.queues[i] == p.queue;
	return type_ok && queue_ok;
}

void
Reset()
{
	npending = 0;
	nnotified = 0;
	overflow = false;
	earliest_delayed = 0;
	ready_key = held_key = claimed_key = kNoKey;
}

void
LowerHintTo(PickKey key)
{
	if (!Less(key, kNoKey))
		return;
	LowerHint(key);
}

/* WakeWaiters sets the latches of up to `count` matching, not yet woken
 * waiters of this database for each pending entry. */
void
WakeWaiters()
{
	if (table == nullptr || pg_atomic_read_u32(&table->waiting) == 0)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	for (int i = 0; i < table->size; i++) {
		Waiter &w = table->waiters[i];
		if (!w.in_use || w.woken || w.dboid != MyDatabaseId)
			continue;
		bool wake = overflow;
		for (int j = 0; j < npending && !wake; j++) {
			if (pending[j].count > 0 && Matches(w, pending[j])) {
				pending[j].count--;
				wake = true;
			}
		}
		if (wake) {
			w.woken = true;
			SetLatch(w.latch);
		}
	}
	LWLockRelease(table->lock);
}

void
LowerNextDue()
{
	if (earliest_delayed == 0)
		return;
	/* Unknown stays unknown: older delayed jobs may exist (wake.hpp). */
	UpdateMySlot([](shmem::DatabaseSlot &slot) {
		if (slot.next_due != 0 && earliest_delayed < slot.next_due)
			slot.next_due = earliest_delayed;
	});
	/* A waiter may be sleeping past the new due time: let one re-time. */
	overflow = true;
	npending = 0;
	WakeWaiters();
}

/* A rolled-back subtransaction makes its claims READY again right away. */
void
OnSubAbort()
{
	stats::OnSubAbort();
	/* PostgreSQL drops the subtransaction's NOTIFYs: send them again. */
	nnotified = 0;
	PickKey lowest = claimed_key;
	KeepMin(&lowest, held_key);
	LowerHintTo(lowest);
}

void
OnXactEvent(XactEvent event, void *arg)
{
	switch (event) {
	case XACT_EVENT_COMMIT:
		stats::OnCommit();
		/* Lower the hint before waking anyone, so the woken look low enough. */
		KeepMin(&ready_key, held_key);
		LowerHintTo(ready_key);
		if (npending > 0 || overflow)
			WakeWaiters();
		LowerNextDue();
		Reset();
		break;
	case XACT_EVENT_ABORT:
	case XACT_EVENT_PARALLEL_ABORT:
		stats::OnAbort();
		/* Claims and locks roll back: those rows are READY again. */
		KeepMin(&claimed_key, held_key);
		LowerHintTo(claimed_key);
		Reset();
		break;
	case XACT_EVENT_PREPARE:
		/* A prepared transaction commits or aborts elsewhere, later: keep
		 * the hint from ever passing what it touched. */
		KeepMin(&ready_key, held_key);
		KeepMin(&ready_key, claimed_key);
		LowerHintTo(ready_key);
		stats::OnAbort();
		Reset();
		break;
	default:
		break;
	}
}

void
FillFilter(ArrayType *array, uint32 *hashes, int *count)
{
	*count = 0;
	if (array == nullptr)
		return;
	Datum *elems;
	bool *nulls;
	int n;
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n > kMaxFilter) {
		*count = -1;
		return;
	}
	for (int i = 0; i < n; i++)
		hashes[i] = Hash(TextDatumGetCString(elems[i]));
	*count = n;
}

} // namespace

PickKey
KeyOf(int32 priority, int64 id)
{
	return PickKey{-static_cast<int64>(priority), id};
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
ReadHint(PickKey *key, uint64 *gen)
{
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	shmem::DatabaseSlot *slot = MySlot(shared);
	if (slot) {
		*gen = slot->hint_gen;
		if (slot->hint_set)
			*key = PickKey{slot->hint_neg_priority, slot->hint_id};
	}
	LWLockRelease(shared->lock);
	/* What this transaction made READY is lowered into the hint only at
	 * COMMIT, but it may pick it up itself before that. */
	KeepMin(key, ready_key);
	KeepMin(key, held_key);
	return slot != nullptr;
}

void
RaiseHint(uint64 gen, PickKey key)
{
	UpdateMySlot([gen, key](shmem::DatabaseSlot &slot) {
		PickKey current{slot.hint_neg_priority, slot.hint_id};
		if (slot.hint_gen == gen && (!slot.hint_set || Less(current, key))) {
			slot.hint_neg_priority = key.neg_priority;
			slot.hint_id = key.id;
			slot.hint_set = true;
		}
	});
}

void
LowerHint(PickKey key)
{
	UpdateMySlot([key](shmem::DatabaseSlot &slot) {
		slot.hint_gen++;
		PickKey current{slot.hint_neg_priority, slot.hint_id};
		if (slot.hint_set && Less(key, current)) {
			slot.hint_neg_priority = key.neg_priority;
			slot.hint_id = key.id;
		}
	});
}

void
NoteReady(const char *queue, const char *job_type, PickKey key)
{
	KeepMin(&ready_key, key);
	const int64 count = 1;
	uint32 queue_hash = Hash(queue);
	bool seen = false;
	for (int i = 0; i < nnotified && !seen; i++)
		seen = notified[i] == queue_hash;
	if (!seen && pqrun_notify) {
		Async_Notify(kChannel, queue);
		if (nnotified < kMaxPending)
			notified[nnotified++] = queue_hash;
	}
	uint32 type_hash = Hash(job_type);
	for (int i = 0; i < npending; i++) {
		if (pending[i].queue == queue_hash && pending[i].type == type_hash) {
			pending[i].count += count;
			return;
		}
	}
	if (npending < kMaxPending)
		pending[npending++] = Pending{queue_hash, type_hash, count};
	else
		overflow = true;
}

void
NoteDelayed(TimestampTz run_after)
{
	if (earliest_delayed == 0 || run_after < earliest_delayed)
		earliest_delayed = run_after;
}

bool
Register(ArrayType *job_types, ArrayType *queues)
{
	if (table == nullptr || MyProc == nullptr || MyProc->pgprocno >= table->size)
		return false;
	/* A FATAL exit (pg_terminate_backend, say) skips PG_FINALLY: leave the
	 * table on process exit too, or the next backend with this PGPROC would
	 * inherit a registration and swallow wake-ups meant for others. */
	static bool exit_hook_installed = false;
	if (!exit_hook_installed) {
		before_shmem_exit([](int, Datum) { Unregister(); }, 0);
		exit_hook_installed = true;
	}
	Waiter w{};
	w.in_use = true;
	w.dboid = MyDatabaseId;
	w.latch = MyLatch;
	FillFilter(job_types, w.types, &w.ntypes);
	FillFilter(queues, w.queues, &w.nqueues);
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	if (!table->waiters[MyProc->pgprocno].in_use)
		pg_atomic_fetch_add_u32(&table->waiting, 1);
	table->waiters[MyProc->pgprocno] = w;
	LWLockRelease(table->lock);
	return true;
}

void
Unregister()
{
	if (table == nullptr || MyProc == nullptr || MyProc->pgprocno >= table->size)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	if (table->waiters[MyProc->pgprocno].in_use) {
		table->waiters[MyProc->pgprocno].in_use = false;
		pg_atomic_fetch_sub_u32(&table->waiting, 1);
	}
	LWLockRelease(table->lock);
}

void
PrepareCheck()
{
	if (table == nullptr || MyProc == nullptr || MyProc->pgprocno >= table->size)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	table->waiters[MyProc->pgprocno].woken = false;
	LWLockRelease(table->lock);
}

TimestampTz
NextDue()
{
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr)
		return 0;
	TimestampTz due = 0;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const shmem::DatabaseSlot &s : shared->slots)
		if (s.state != shmem::SlotState::kFree && s.dboid == MyDatabaseId)
			due = s.next_due;
	LWLockRelease(shared->lock);
	return due;
}

void
ReplaceNextDue(TimestampTz seen, TimestampTz due)
{
	UpdateMySlot([seen, due](shmem::DatabaseSlot &slot) {
		if (slot.next_due == seen)
			slot.next_due = due;
	});
}

bool
DelayedMayBeDue()
{
	TimestampTz due = NextDue();
	return due == 0 || due <= GetCurrentTimestamp();
}

void
InstallCallbacks()
{
	RegisterXactCallback([](XactEvent event, void *arg) { GuardedEntry([=]() { OnXactEvent(event, arg); }); },
	                     nullptr);
	RegisterSubXactCallback(
		[](SubXactEvent event, SubTransactionId, SubTransactionId, void *) {
			if (event == SUBXACT_EVENT_START_SUB)
				GuardedEntry(stats::OnSubStart);
			else if (event == SUBXACT_EVENT_ABORT_SUB)
				GuardedEntry(OnSubAbort);
		},
		nullptr);
}

Size
ShmemSize()
{
	return add_size(offsetof(WaiterTable, waiters), mul_size(sizeof(Waiter), MaxBackends));
}

void
ShmemInit()
{
	bool found;
	table = static_cast<WaiterTable *>(ShmemInitStruct("pqrun waiters", ShmemSize(), &found));
	if (!found) {
		memset(table, 0, ShmemSize());
		table->lock = &(GetNamedLWLockTranche("pqrun"))[1].lock;
		pg_atomic_init_u32(&table->waiting, 0);
		table->size = MaxBackends;
	}
}

} // namespace pqrun::wake
