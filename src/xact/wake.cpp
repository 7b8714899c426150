/* src/xact/wake.cpp — commit-time NOTIFY and long-poll wake-ups.
 *
 * Local state lives in TopMemoryContext-free static arrays and is reset at
 * the end of every transaction. The shared waiter table is indexed by the
 * waiter's index in the PGPROC array; `waiting` counts registered waiters so
 * that a commit with nobody waiting takes no lock at all.
 */
#include "xact/wake.hpp"

#include "guc.hpp"
#include "pg/boundary.hpp"
#include "shmem/locks.hpp"
#include "shmem/shmem.hpp"
#include "shmem/stats.hpp"
#include "xact/pick_hint.hpp"

namespace pqrun::wake {

using pick_hint::PickKey;

namespace {

constexpr int kMaxFilter = 4;
constexpr int kMaxPending = 16;
constexpr const char *kChannel = "pqrun_jobs";
constexpr size_t kMaxPayload = BLCKSZ - NAMEDATALEN - 128; /* async.c's NOTIFY_PAYLOAD_MAX_LENGTH */

/* Jobs of one (queue, job_type) hash pair: what this transaction made
 * runnable, what it claimed, what a wake-up counted on a waiter for. */
struct Pending {
	uint32 queue;
	uint32 type;
	int64 count;
};

/* A long-poll waiter takes up to `batch` jobs a look, so a commit wakes one
 * waiter for each `batch` of its jobs, not one for each job: a fleet of
 * waiters asking for 8 is not woken 8 times over. What a wake-up counted on
 * it for is kept in `owed` (a (queue, job_type) pair and a count; count -1:
 * any job, a wake-up of every waiter), to be passed on when it leaves
 * without having looked for it (Unregister). */
struct Waiter {
	bool in_use;
	bool woken;
	Oid dboid;
	Latch *latch;
	int ntypes; /* 0: any; -1: too many to track, treat as any */
	int nqueues;
	uint32 types[kMaxFilter];
	uint32 queues[kMaxFilter];
	int32 batch;
	Pending owed;
	int64 lease_job; /* a waiting heartbeat's job, 0: none (not a long-poll waiter) */
};

struct WaiterTable {
	LWLock *lock;
	pg_atomic_uint32 waiting;
	pg_atomic_uint32 lease_waiting; /* waiting heartbeats */
	int size;
	Waiter waiters[FLEXIBLE_ARRAY_MEMBER];
};

WaiterTable *table = nullptr;

/* MyIndex answers this backend's entry in the waiter table, -1 when there is
 * no table (no shared memory) or the backend has none. */
int
MyIndex()
{
	int index = table != nullptr && MyProc != nullptr ? compat::MyProcIndex() : -1;
	return index >= 0 && index < table->size ? index : -1;
}

/* What the wake-up this backend's last look began after counted on it for
 * (count 0: none): if the look ends without a claim, or in an error, it is
 * owed to another waiter. */
Pending look_owes{0, 0, 0};

/* What this transaction made runnable. */
Pending pending[kMaxPending];
int npending = 0;
bool overflow = false; /* more pairs than tracked: wake everyone */

/* What this transaction claimed, by (queue, job_type) hash and the
 * transaction nesting level it was claimed at: READY again, and worth a
 * wake-up, if that level rolls back. */
struct Claimed {
	Pending pair;
	int level;
};
Claimed claimed[kMaxPending];
int nclaimed = 0;
int claimed_overflow_level = INT_MAX; /* claims beyond the table, from this level on */

/* Running jobs this transaction cancelled: their waiting heartbeats are
 * woken at its commit. */
int64 ended_leases[kMaxPending];
int nended = 0;
bool ended_overflow = false;

/* This transaction changed pqrun.queue_control: the queues whose controls
 * it changed, written into the database's ring at its commit (all_changed:
 * more than one commit's share of the ring, or a name too long for it),
 * and whether a waiter may now claim what it could not (controls_wake). */
bool controls_changed = false;
bool controls_wake = false;
bool all_changed = false;
char changed_names[DatabaseState::kChangedPerCommit][DatabaseState::kChangedName];
int changed_lens[DatabaseState::kChangedPerCommit];
int nchanged = 0;

/* A queue to notify at this transaction's commit, noted at transaction
 * nesting level `level` (a rollback there takes it back). NOTIFY waits for
 * the commit because PREPARE TRANSACTION refuses a transaction that has
 * notified, and a queue name of 8000 bytes or more is sent as an empty
 * payload, since NOTIFY refuses longer ones. */
struct Notice {
	uint32 hash;
	int level;
	char *queue;
};
List *notices = NIL; /* of Notice, in TopTransactionContext */

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
	notices = NIL; /* freed with the transaction */
	overflow = false;
	pick_hint::Forget();
	nclaimed = 0;
	claimed_overflow_level = INT_MAX;
	nended = 0;
	ended_overflow = false;
	controls_changed = controls_wake = all_changed = false;
	nchanged = 0;
}

/* PushChanged moves the controls' generation of `state` and writes its
 * entries into the ring: this transaction's queues, or one that stands for
 * all of them. */
void
PushChanged(DatabaseState &state, bool all)
{
	state.controls_gen++;
	auto push = [&state](const char *name, int len) {
		int at = static_cast<int>(state.changed_next++ % DatabaseState::kChanged);
		state.changed_gen[at] = state.controls_gen;
		state.changed_len[at] = len;
		if (len > 0)
			memcpy(state.changed_name[at], name, len);
	};
	if (all || nchanged == 0)
		push(nullptr, -1);
	else
		for (int i = 0; i < nchanged; i++)
			push(changed_names[i], changed_lens[i]);
}

/* WakeLeaseWaiters wakes this database's waiting heartbeats of the jobs
 * whose leases this transaction ended. */
void
WakeLeaseWaiters()
{
	if (table == nullptr || (nended == 0 && !ended_overflow) || pg_atomic_read_u32(&table->lease_waiting) == 0)
		return;
	LWLockAcquire(table->lock, LW_SHARED);
	for (int i = 0; i < table->size; i++) {
		const Waiter &w = table->waiters[i];
		if (w.lease_job == 0 || w.dboid != MyDatabaseId)
			continue;
		bool wake = ended_overflow;
		for (int j = 0; j < nended && !wake; j++)
			wake = ended_leases[j] == w.lease_job;
		if (wake)
			SetLatch(w.latch);
	}
	LWLockRelease(table->lock);
}

/* LeaveOnExit makes sure a FATAL exit (pg_terminate_backend, say), which
 * skips PG_FINALLY, leaves the table too, or the next backend with this
 * PGPROC would inherit a registration and swallow wake-ups meant for
 * others. */
void
LeaveOnExit()
{
	static bool installed = false;
	if (!installed) {
		before_shmem_exit(
		    [](int, Datum) {
			    Unregister(false);
			    UnregisterLeaseWait();
		    },
		    0);
		installed = true;
	}
}

/* AddPending notes one job of the (queue, job_type) hashes that a waiter
 * may now take, woken at COMMIT. */
void
AddPending(uint32 queue_hash, uint32 type_hash)
{
	for (int i = 0; i < npending; i++) {
		if (pending[i].queue == queue_hash && pending[i].type == type_hash) {
			pending[i].count++;
			return;
		}
	}
	if (npending < kMaxPending)
		pending[npending++] = Pending{queue_hash, type_hash, 1};
	else
		overflow = true;
}

/* MoveQueueGens moves the generations of the queues of `pairs` in
 * `state`, or of every queue when `all`. */
void
MoveQueueGens(DatabaseState &state, const Pending *pairs, int n, bool all)
{
	for (int i = 0; i < DatabaseState::kQueueGens && all; i++)
		state.queue_gen[i]++;
	for (int i = 0; i < n && !all; i++)
		state.queue_gen[pairs[i].queue % DatabaseState::kQueueGens]++;
}

/* WakeMatching sets the latches of enough matching, not yet woken waiters
 * of database `dboid` to take the `count` jobs of each of the `n` entries
 * of `wanted` (each waiter counts for its batch), counting the entries
 * down; of every one when `all`. The table's lock is held. */
void
WakeMatching(Oid dboid, Pending *wanted, int n, bool all)
{
	for (int i = 0; i < table->size; i++) {
		Waiter &w = table->waiters[i];
		if (!w.in_use || w.woken || w.dboid != dboid)
			continue;
		Pending owed{0, 0, -1};
		bool wake = all;
		for (int j = 0; j < n && !wake; j++) {
			if (wanted[j].count > 0 && Matches(w, wanted[j])) {
				owed = wanted[j];
				owed.count = Min(wanted[j].count, static_cast<int64>(w.batch));
				wanted[j].count -= owed.count;
				wake = true;
			}
		}
		if (wake) {
			w.woken = true;
			w.owed = owed;
			SetLatch(w.latch);
		}
	}
}

/* WakeWaiters wakes this database's waiters for `wanted` (WakeMatching). */
void
WakeWaiters(Pending *wanted, int n, bool all)
{
	if (table == nullptr || pg_atomic_read_u32(&table->waiting) == 0)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	WakeMatching(MyDatabaseId, wanted, n, all);
	LWLockRelease(table->lock);
}

/* WakeForClaims wakes waiters for the claims made at nesting level `level`
 * or deeper, which a rollback made READY again, and forgets them. */
void
WakeForClaims(int level)
{
	Pending wanted[kMaxPending];
	int n = 0, kept = 0;
	for (int i = 0; i < nclaimed; i++) {
		if (claimed[i].level >= level)
			wanted[n++] = claimed[i].pair;
		else
			claimed[kept++] = claimed[i];
	}
	nclaimed = kept;
	bool all = claimed_overflow_level <= level;
	if (all)
		claimed_overflow_level = INT_MAX;
	if (n > 0 || all) {
		shmem::UpdateMySlot([&](shmem::DatabaseSlot &slot) { MoveQueueGens(slot.wake, wanted, n, all); });
		WakeWaiters(wanted, n, all);
	}
}

/* Overlap answers whether some job could match both filters (hashes, 0:
 * any, -1: untracked). */
bool
Overlap(const uint32 *a, int na, const uint32 *b, int nb)
{
	if (na <= 0 || nb <= 0)
		return true;
	for (int i = 0; i < na; i++)
		for (int j = 0; j < nb; j++)
			if (a[i] == b[j])
				return true;
	return false;
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

void
WakeAll()
{
	WakeWaiters(nullptr, 0, true);
}

void
AfterPreparedEnded()
{
	/* Whatever the prepared transaction made READY, or READY again by
	 * rolling back, is unknown here: every waiter looks. */
	shmem::UpdateMySlot([](shmem::DatabaseSlot &slot) {
		if (slot.wake.prepared_controls)
			PushChanged(slot.wake, true);
	});
	WakeWaiters(nullptr, 0, true);
	stats::InvalidateDatabase();
}

void
NoteClaimed(PickKey key, const char *queue, const char *job_type)
{
	pick_hint::NoteClaimed(key);
	int level = GetCurrentTransactionNestLevel();
	Pending pair{Hash(queue), Hash(job_type), 1};
	for (int i = 0; i < nclaimed; i++) {
		if (claimed[i].level == level && claimed[i].pair.queue == pair.queue && claimed[i].pair.type == pair.type) {
			claimed[i].pair.count++;
			return;
		}
	}
	if (nclaimed < kMaxPending)
		claimed[nclaimed++] = Claimed{pair, level};
	else
		claimed_overflow_level = Min(claimed_overflow_level, level);
}

void
ResetDatabase()
{
	shmem::UpdateMySlot([](shmem::DatabaseSlot &slot) {
		pick_hint::ResetIn(slot.wake);
		slot.wake.next_due = 0;
		PushChanged(slot.wake, true);
	});
}

void
QueueGens(const char *const *queues, int n, uint64 *gens)
{
	for (int i = 0; i < n; i++)
		gens[i] = 0;
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr || n == 0)
		return;
	uint32 *hashes = static_cast<uint32 *>(palloc(sizeof(uint32) * n));
	for (int i = 0; i < n; i++)
		hashes[i] = Hash(queues[i]) % DatabaseState::kQueueGens;
	LWLockAcquire(shared->lock, LW_SHARED);
	if (shmem::DatabaseSlot *slot = shmem::MySlot(shared))
		for (int i = 0; i < n; i++)
			gens[i] = slot->wake.queue_gen[hashes[i]];
	LWLockRelease(shared->lock);
	pfree(hashes);
}

void
NoteReady(const char *queue, const char *job_type, PickKey key)
{
	pick_hint::NoteReady(key);
	uint32 queue_hash = Hash(queue);
	if (pqrun_notify) {
		/* The first queues are looked up here, so that a batch does not note
		 * its queue per job; NOTIFY itself folds the duplicates of others. */
		bool seen = false;
		for (int i = 0; i < list_length(notices) && i < kMaxPending && !seen; i++) {
			const Notice *notice = static_cast<const Notice *>(list_nth(notices, i));
			seen = notice->hash == queue_hash && strcmp(notice->queue, queue) == 0;
		}
		if (!seen) {
			MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
			auto *notice = static_cast<Notice *>(palloc(sizeof(Notice)));
			*notice = Notice{queue_hash, GetCurrentTransactionNestLevel(), pstrdup(queue)};
			notices = lappend(notices, notice);
			MemoryContextSwitchTo(old);
		}
	}
	AddPending(queue_hash, Hash(job_type));
}

void
NoteFreed(const char *queue, const char *job_type)
{
	AddPending(Hash(queue), Hash(job_type));
}

void
NoteControlsChanged(const char *queue, int len, bool wakes)
{
	controls_changed = true;
	controls_wake = controls_wake || wakes;
	if (all_changed)
		return;
	if (queue == nullptr || len <= 0 || len > DatabaseState::kChangedName) {
		all_changed = true;
		return;
	}
	for (int i = 0; i < nchanged; i++)
		if (changed_lens[i] == len && memcmp(changed_names[i], queue, len) == 0)
			return;
	if (nchanged == DatabaseState::kChangedPerCommit) {
		all_changed = true;
		return;
	}
	memcpy(changed_names[nchanged], queue, len);
	changed_lens[nchanged++] = len;
}

uint64
ControlsGen()
{
	return ControlsChangedSince(kNoControlsGen, nullptr);
}

uint64
ControlsChangedSince(uint64 since, ChangedQueues *changed)
{
	shmem::SharedState *shared = shmem::Shared();
	if (changed != nullptr)
		changed->count = -1;
	if (shared == nullptr)
		return kNoControlsGen;
	uint64 gen = kNoControlsGen;
	LWLockAcquire(shared->lock, LW_SHARED);
	if (shmem::DatabaseSlot *slot = shmem::MySlot(shared)) {
		const DatabaseState &state = slot->wake;
		gen = state.controls_gen;
		/* Every commit since `since` left its entries in the ring, unless
		 * they were written over or `since` is of an earlier slot. */
		uint64 first = state.changed_next > DatabaseState::kChanged ? state.changed_next - DatabaseState::kChanged : 0;
		bool complete = since != kNoControlsGen && since >= state.controls_gen0 && since <= gen &&
		                (first == 0 || state.changed_gen[first % DatabaseState::kChanged] <= since);
		if (changed != nullptr && complete) {
			/* The newest entries first, as far back as `since`: a copy that
			 * is up to date reads none, under a lock every commit takes. */
			changed->count = 0;
			for (uint64 e = state.changed_next; e > first; e--) {
				int at = static_cast<int>((e - 1) % DatabaseState::kChanged);
				if (state.changed_gen[at] <= since)
					break;
				if (state.changed_len[at] < 0 || changed->count == ChangedQueues::kMax) {
					changed->count = -1;
					break;
				}
				memcpy(changed->names[changed->count], state.changed_name[at], state.changed_len[at]);
				changed->lens[changed->count++] = state.changed_len[at];
			}
		}
	}
	LWLockRelease(shared->lock);
	return gen;
}

/* PassOn wakes other waiters for what a wake-up counted on `me` for
 * (`owed`), which it leaves without having looked for: waiters that match
 * its pair, or, where that is not known (count -1), every waiter whose
 * filters overlap `me`'s. The table's lock is held. */
void
PassOn(const Waiter &me, Pending owed)
{
	if (owed.count > 0) {
		WakeMatching(me.dboid, &owed, 1, false);
		return;
	}
	for (int i = 0; i < table->size; i++) {
		Waiter &w = table->waiters[i];
		if (w.in_use && !w.woken && w.dboid == me.dboid && Overlap(w.types, w.ntypes, me.types, me.ntypes) &&
		    Overlap(w.queues, w.nqueues, me.queues, me.nqueues)) {
			w.woken = true;
			w.owed = Pending{0, 0, -1};
			SetLatch(w.latch);
		}
	}
}

bool
Register(const PickFilter &filter, int32 batch)
{
	int mine = MyIndex();
	if (mine < 0)
		return false;
	LeaveOnExit();
	Waiter w{};
	w.in_use = true;
	w.dboid = MyDatabaseId;
	w.latch = MyLatch;
	w.batch = Max(batch, 1);
	FillFilter(filter.job_types, w.types, &w.ntypes);
	FillFilter(filter.queues, w.queues, &w.nqueues);
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	if (!table->waiters[mine].in_use)
		pg_atomic_fetch_add_u32(&table->waiting, 1);
	w.lease_job = table->waiters[mine].lease_job; /* the heartbeat's count must stay right */
	table->waiters[mine] = w;
	LWLockRelease(table->lock);
	return true;
}

void
Unregister(bool claimed_any)
{
	int mine = MyIndex();
	if (mine < 0)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	Waiter &me = table->waiters[mine];
	if (me.in_use) {
		me.in_use = false;
		pg_atomic_fetch_sub_u32(&table->waiting, 1);
		/* A commit counted on us to take its jobs: one that woke us after
		 * our last look began (which may not have seen them), or the one our
		 * last look followed, if that look claimed nothing. */
		if (me.woken)
			PassOn(me, me.owed);
		if (look_owes.count != 0 && !claimed_any)
			PassOn(me, look_owes);
	}
	LWLockRelease(table->lock);
	look_owes = Pending{0, 0, 0};
}

void
RegisterLeaseWait(int64 job_id)
{
	int mine = MyIndex();
	if (mine < 0)
		return;
	LeaveOnExit();
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	Waiter &me = table->waiters[mine];
	if (me.lease_job == 0)
		pg_atomic_fetch_add_u32(&table->lease_waiting, 1);
	me.dboid = MyDatabaseId;
	me.latch = MyLatch;
	me.lease_job = job_id;
	LWLockRelease(table->lock);
}

void
UnregisterLeaseWait()
{
	int mine = MyIndex();
	if (mine < 0)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	Waiter &me = table->waiters[mine];
	if (me.lease_job != 0) {
		me.lease_job = 0;
		pg_atomic_fetch_sub_u32(&table->lease_waiting, 1);
	}
	LWLockRelease(table->lock);
}

void
NoteLeaseEnded(int64 job_id)
{
	if (nended < kMaxPending)
		ended_leases[nended++] = job_id;
	else
		ended_overflow = true;
}

void
LookDone()
{
	look_owes = Pending{0, 0, 0};
}

void
PrepareCheck()
{
	int mine = MyIndex();
	if (mine < 0)
		return;
	LWLockAcquire(table->lock, LW_EXCLUSIVE);
	Waiter &me = table->waiters[mine];
	look_owes = me.woken ? me.owed : Pending{0, 0, 0};
	me.woken = false;
	LWLockRelease(table->lock);
}

/* A rolled-back subtransaction makes its claims READY again right away. */
void
AtSubAbort()
{
	pick_hint::AtSubAbort();
	int level = GetCurrentTransactionNestLevel();
	WakeForClaims(level);
	ListCell *lc;
	foreach (lc, notices)
		if (static_cast<Notice *>(lfirst(lc))->level >= level)
			notices = foreach_delete_current (notices, lc);
}

/* A committed subtransaction's claims now stand or fall with its parent. */
void
AtSubCommit()
{
	int level = GetCurrentTransactionNestLevel();
	ListCell *lc;
	foreach (lc, notices) {
		auto *notice = static_cast<Notice *>(lfirst(lc));
		notice->level = Min(notice->level, level - 1);
	}
	for (int i = 0; i < nclaimed; i++)
		if (claimed[i].level >= level)
			claimed[i].level = level - 1;
	if (claimed_overflow_level >= level && claimed_overflow_level != INT_MAX)
		claimed_overflow_level = level - 1;
}

void
BeforeCommit()
{
	ListCell *lc;
	foreach (lc, notices) {
		const char *queue = static_cast<Notice *>(lfirst(lc))->queue;
		Async_Notify(kChannel, strlen(queue) < kMaxPayload ? queue : "");
	}
	notices = NIL;
}

void
AtCommit()
{
	/* Lower the hint before waking anyone, so the woken look low enough. */
	bool lower = pick_hint::CommitPending();
	if (lower || npending > 0 || overflow)
		shmem::UpdateMySlot([lower](shmem::DatabaseSlot &slot) {
			if (lower)
				pick_hint::LowerAtCommit(slot.wake);
			MoveQueueGens(slot.wake, pending, npending, overflow);
		});
	/* New controls (a resume, a raised limit) may let every waiter run; a
	 * queue's keyed mark set or cleared lets none. */
	if (controls_changed)
		shmem::UpdateMySlot([](shmem::DatabaseSlot &slot) { PushChanged(slot.wake, all_changed); });
	if (npending > 0 || overflow || controls_wake)
		WakeWaiters(pending, npending, overflow || controls_wake);
	WakeLeaseWaiters();
	Reset();
}

void
AtAbort()
{
	pick_hint::AtAbort();
	WakeForClaims(0);
	Reset();
}

void
AtPrepare()
{
	pick_hint::AtPrepare();
	if (controls_changed)
		shmem::UpdateMySlot([](shmem::DatabaseSlot &slot) { slot.wake.prepared_controls = true; });
	Reset();
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
		table->lock = shmem::LockOf(shmem::Lock::kWaiters);
		pg_atomic_init_u32(&table->waiting, 0);
		pg_atomic_init_u32(&table->lease_waiting, 0);
		table->size = MaxBackends;
	}
}

} // namespace pqrun::wake
