/* src/bgw/launcher.cpp — the launcher: one static background worker that
 * keeps a maintenance worker running in every database where pqrun is
 * installed, with no per-database configuration.
 *
 * It connects to no database (shared catalogs only), reads pg_database, and
 * probes each connectable database by starting a maintenance worker there;
 * the worker stays if it finds the extension and leaves (slot kAbsent)
 * otherwise. The launcher then remembers that database in `absent` and frees
 * its slot, so that a cluster with more databases than slots is probed in
 * turns and only databases with pqrun keep one. CREATE EXTENSION registers
 * its database and wakes the launcher, so a worker starts within a second;
 * new databases are found by a rescan every kRescanMs. A worker that died is
 * restarted after kRestartDelayMs.
 */
#include "bgw/bgw.hpp"
#include "jobs/flow_control.hpp"
#include "pg/boundary.hpp"
#include "shmem/shmem.hpp"
#include "shmem/stats.hpp"

namespace pqrun::bgw {

namespace {

/* The wait event of the launcher between rounds (compat::ExtensionWaitEvent). */
uint32 launcher_main_wait_event = 0;

constexpr long kLoopMs = 1000;
constexpr long kRescanMs = 10000;
constexpr long kRestartDelayMs = 5000;

using shmem::DatabaseSlot;
using shmem::SlotState;

/* Handles of the workers this launcher started, by slot index (in
 * TopMemoryContext). */
BackgroundWorkerHandle *handles[shmem::kMaxDatabases];

/* Databases a worker found without pqrun: not probed again until they are
 * dropped, or until RegisterDatabase found no free slot (reprobe_epoch).
 * CREATE EXTENSION in one of them registers it directly. */
HTAB *absent = nullptr;
uint32 absent_epoch = 0;

/* No background worker slot was free: start nothing before this. */
TimestampTz no_worker_slot_until = 0;

void
ForgetAbsent()
{
	if (absent)
		hash_destroy(absent);
	HASHCTL ctl{};
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(Oid);
	ctl.hcxt = TopMemoryContext;
	absent = hash_create("pqrun databases without pqrun", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

bool
IsAbsent(Oid dboid)
{
	return hash_search(absent, &dboid, HASH_FIND, nullptr) != nullptr;
}

/* FreeIfAbsent frees slot `s` of a database found without pqrun, once its
 * worker is gone, and remembers the database. Caller holds the lock. */
void
FreeIfAbsent(DatabaseSlot &s)
{
	if (s.state != SlotState::kAbsent)
		return;
	(void)hash_search(absent, &s.dboid, HASH_ENTER, nullptr);
	s.state = SlotState::kFree;
}

/* DatabaseList answers the oids of connectable databases (palloc'd in the
 * caller's context); *count gets their number. */
Oid *
DatabaseList(int *count)
{
	MemoryContext caller = CurrentMemoryContext;
	Oid *oids = nullptr;
	int n = 0, capacity = 16;
	StartTransactionCommand();
	(void)GetTransactionSnapshot();
	oids = static_cast<Oid *>(MemoryContextAlloc(caller, sizeof(Oid) * capacity));
	Relation rel = table_open(DatabaseRelationId, AccessShareLock);
	TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
	HeapTuple tuple;
	while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
		auto *db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
		if (!db->datallowconn)
			continue;
		if (n == capacity) {
			capacity *= 2;
			oids = static_cast<Oid *>(repalloc(oids, sizeof(Oid) * capacity));
		}
		oids[n++] = db->oid;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(caller);
	*count = n;
	return oids;
}


/* Rescan adds a kProbe slot for every connectable database that has none and
 * was not found without pqrun, as long as slots are free, and frees the
 * slots of databases that are gone or without pqrun. Answers whether some
 * database waits for a slot. Caller holds no lock. */
bool
Rescan(shmem::SharedState *shared)
{
	int n;
	Oid *oids = DatabaseList(&n);
	stats::KeepDatabases(oids, n);
	flow_control::KeepDatabases(oids, n);
	TimestampTz now = GetCurrentTimestamp();
	bool waiting = false;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->reprobe_epoch != absent_epoch) {
		absent_epoch = shared->reprobe_epoch;
		ForgetAbsent();
	}
	for (int i = 0; i < shmem::kMaxDatabases; i++) {
		DatabaseSlot &s = shared->slots[i];
		if (s.state == SlotState::kFree || s.pid != 0 || handles[i] != nullptr)
			continue;
		if (!shmem::Listed(oids, n, s.dboid))
			s.state = SlotState::kFree;
		FreeIfAbsent(s);
	}
	HASH_SEQ_STATUS seq;
	hash_seq_init(&seq, absent);
	while (Oid *gone = static_cast<Oid *>(hash_seq_search(&seq)))
		if (!shmem::Listed(oids, n, *gone))
			(void)hash_search(absent, gone, HASH_REMOVE, nullptr);
	for (int j = 0; j < n; j++) {
		bool known = IsAbsent(oids[j]);
		for (DatabaseSlot &s : shared->slots)
			known = known || (s.state != SlotState::kFree && s.dboid == oids[j]);
		for (DatabaseSlot &s : shared->slots) {
			if (known || s.state != SlotState::kFree)
				continue;
			s = DatabaseSlot{oids[j], SlotState::kProbe, 0, nullptr, now, 0, 0, {}};
			s.wake.controls_gen = s.wake.controls_gen0 = static_cast<uint64>(now);
			known = true;
		}
		waiting = waiting || !known;
	}
	LWLockRelease(shared->lock);
	pfree(oids);
	return waiting;
}

bool
StartWorker(int slot_index, Oid dboid)
{
	BackgroundWorker worker{};
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "pqrun", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "pqrun_maintenance_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "pqrun maintenance for database %u", dboid);
	strlcpy(worker.bgw_type, "pqrun maintenance", BGW_MAXLEN);
	worker.bgw_main_arg = Int32GetDatum(slot_index);
	worker.bgw_notify_pid = MyProcPid;
	/* The handle outlives this loop iteration's memory context. */
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	bool started = RegisterDynamicBackgroundWorker(&worker, &handles[slot_index]);
	MemoryContextSwitchTo(old);
	return started;
}

/* Reconcile starts workers for slots that want one and notices workers that
 * stopped: a clean exit has already set the slot's state; anything else
 * (crash, FATAL) is retried after a delay. Answers whether it freed a slot. */
bool
Reconcile(shmem::SharedState *shared)
{
	TimestampTz now = GetCurrentTimestamp();
	bool freed = false;
	for (int i = 0; i < shmem::kMaxDatabases; i++) {
		if (handles[i] != nullptr) {
			pid_t pid;
			if (GetBackgroundWorkerPid(handles[i], &pid) != BGWH_STOPPED)
				continue;
			pfree(handles[i]);
			handles[i] = nullptr;
			LWLockAcquire(shared->lock, LW_EXCLUSIVE);
			DatabaseSlot &s = shared->slots[i];
			s.pid = 0;
			s.latch = nullptr;
			elog(DEBUG1, "pqrun launcher: worker of database %u stopped in state %d", s.dboid, (int)s.state);
			if (s.state == SlotState::kRunning || s.state == SlotState::kStarting) {
				s.state = SlotState::kProbe;
				s.retry_at = TimestampTzPlusMilliseconds(now, kRestartDelayMs);
			}
			FreeIfAbsent(s);
			freed = freed || s.state == SlotState::kFree;
			LWLockRelease(shared->lock);
		}
		if (now < no_worker_slot_until)
			continue;
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		DatabaseSlot &s = shared->slots[i];
		bool start = (s.state == SlotState::kProbe || s.state == SlotState::kStepAside) && s.retry_at <= now &&
		             handles[i] == nullptr;
		Oid dboid = s.dboid;
		if (start)
			s.state = SlotState::kStarting;
		LWLockRelease(shared->lock);
		if (start)
			elog(DEBUG1, "pqrun launcher: starting a worker for database %u", dboid);
		if (start && !StartWorker(i, dboid)) {
			/* Try again later, this database and every other one: one log
			 * line per attempt, not one per database. */
			ereport(LOG, (errmsg("pqrun launcher: no free background worker slot for database %u", dboid),
			              errhint("Raise max_worker_processes.")));
			no_worker_slot_until = TimestampTzPlusMilliseconds(now, kRestartDelayMs);
			LWLockAcquire(shared->lock, LW_EXCLUSIVE);
			s.state = SlotState::kProbe;
			s.retry_at = no_worker_slot_until;
			LWLockRelease(shared->lock);
		}
	}
	return freed;
}

void
LauncherMain()
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
	pgstat_report_appname("pqrun launcher");

	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr)
		proc_exit(0);
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_pid = MyProcPid;
	shared->launcher_latch = MyLatch;
	/* After a crash restart, forget the previous generation's workers. */
	for (DatabaseSlot &s : shared->slots) {
		s.pid = 0;
		s.latch = nullptr;
		if (s.state == SlotState::kRunning || s.state == SlotState::kStarting)
			s.state = SlotState::kProbe;
	}
	absent_epoch = shared->reprobe_epoch;
	LWLockRelease(shared->lock);
	ForgetAbsent();

	MemoryContext loop_context = AllocSetContextCreate(TopMemoryContext, "pqrun launcher loop", ALLOCSET_DEFAULT_SIZES);
	TimestampTz next_rescan = 0;
	bool waiting = false; /* some database waits for a slot */
	for (;;) {
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContext old = MemoryContextSwitchTo(loop_context);
		if (GetCurrentTimestamp() >= next_rescan) {
			waiting = Rescan(shared);
			next_rescan = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), kRescanMs);
		}
		/* A slot freed while databases wait for one: give it out now. */
		if (Reconcile(shared) && waiting)
			next_rescan = 0;
		MemoryContextSwitchTo(old);
		MemoryContextReset(loop_context);
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, kLoopMs,
		                compat::ExtensionWaitEvent(launcher_main_wait_event, "PqrunLauncherMain"));
		ResetLatch(MyLatch);
	}
}

} // namespace

void
RegisterLauncher()
{
	BackgroundWorker worker{};
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	strlcpy(worker.bgw_library_name, "pqrun", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "pqrun_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pqrun launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pqrun launcher", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

} // namespace pqrun::bgw

extern "C" PGDLLEXPORT void
pqrun_launcher_main(Datum arg)
{
	pqrun::GuardedEntry(pqrun::bgw::LauncherMain);
}
