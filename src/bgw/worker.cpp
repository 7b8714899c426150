/* src/bgw/worker.cpp — the per-database maintenance worker.
 *
 * Started by the launcher with its slot index. Every pqrun.reap_interval it
 * runs one maintenance round (the same code as pqrun.run_maintenance(), in
 * two transactions). It leaves cleanly when the extension is not (or no
 * longer) installed, or when asked to step aside for DROP DATABASE and
 * friends. An error in a round is logged, the transaction aborted, and the
 * next round waits longer (up to a minute) so a persistent error neither
 * spins nor floods the log; a lock wait given up is not an error.
 */
#include "guc.hpp"
#include "bgw/bgw.hpp"
#include "bgw/maintenance.hpp"
#include "pg/boundary.hpp"
#include "pg/citus.hpp"
#include "pg/installed.hpp"
#include "shmem/shmem.hpp"

namespace pqrun::bgw {

namespace {

/* The wait event of the maintenance worker between rounds (compat::ExtensionWaitEvent). */
uint32 maintenance_main_wait_event = 0;

using shmem::DatabaseSlot;
using shmem::SlotState;

constexpr long kMaxErrorBackoffMs = 60000;
constexpr long kGracePollMs = 100;

DatabaseSlot *my_slot = nullptr;

/* LeaveSlot marks this worker gone from its slot in `state`. Caller holds
 * the slot lock. */
void
LeaveSlot(SlotState state)
{
	my_slot->state = state;
	my_slot->pid = 0;
	my_slot->latch = nullptr;
}

/* LeaveIfAbsent decides for a worker that found no pqrun: it leaves (slot
 * kAbsent) once its grace has run out, unless a CREATE EXTENSION registered
 * the database since it last looked, whose transaction gets the grace of the
 * registration. Under the slot lock, so a registration cannot slip in
 * between the decision and the slot's new state. */
bool
LeaveIfAbsent(uint32 *registrations_seen, TimestampTz *grace_until)
{
	shmem::SharedState *shared = shmem::Shared();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (my_slot->registrations != *registrations_seen) {
		*registrations_seen = my_slot->registrations;
		*grace_until = Max(*grace_until, my_slot->grace_until);
	}
	bool leave = GetCurrentTimestamp() >= *grace_until;
	if (leave)
		LeaveSlot(SlotState::kAbsent);
	LWLockRelease(shared->lock);
	return leave;
}

bool
AskedToStepAside()
{
	shmem::SharedState *shared = shmem::Shared();
	LWLockAcquire(shared->lock, LW_SHARED);
	bool step_aside = my_slot->state == SlotState::kStepAside;
	LWLockRelease(shared->lock);
	return step_aside;
}

/* The database's and the role's settings (ALTER DATABASE/ROLE ... SET) and
 * postgresql.conf apply to this worker as to any session. Those meant for
 * application sessions must not stop maintenance: a read-only default fails
 * every round, a statement, lock or idle timeout cuts rounds short, and
 * SERIALIZABLE makes them fail against concurrent transactions. A
 * search_path is worse: the worker runs as the bootstrap superuser, and the
 * database's owner could put operators of its own in front of pg_catalog's.
 * As autovacuum does, this process overrides them. */
void
OverrideSessionDefaults()
{
	static const char *const kSettings[][2] = {
		{"search_path", "pg_catalog, pg_temp"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_isolation", "read committed"},
		{"statement_timeout", "0"},
		{"idle_in_transaction_session_timeout", "0"},
#if PQRUN_HAVE_TRANSACTION_TIMEOUT
		{"transaction_timeout", "0"},
#endif
	};
	for (const auto &setting : kSettings)
		SetConfigOption(setting[0], setting[1], PGC_SUSET, PGC_S_OVERRIDE);
	/* A session's value, not an override: the history round's DDL waits
	 * 100 ms at most by the SET clause of pqrun._history_round, which an
	 * override would void (a worker waiting for job_done while a session
	 * waits for the rows the round has locked is a deadlock). Any other wait
	 * of a round ends at half of deadlock_timeout (500 ms at most): a round
	 * that waits while it holds locks a session then waits for (DROP
	 * EXTENSION and TRUNCATE lock the job tables in another order) gives up
	 * before that session's deadlock check would make it the victim, and
	 * the next round tries again. */
	char lock_timeout[32];
	snprintf(lock_timeout, sizeof(lock_timeout), "%dms", Max(1, Min(500, DeadlockTimeout / 2)));
	SetConfigOption("lock_timeout", lock_timeout, PGC_SUSET, PGC_S_SESSION);
}

enum class Round { kDone, kNoExtension, kNotServed };

/* What the last WARNING about the installed version said (NotServed). */
char *not_served_said = nullptr;

/* NotServed warns, once for each thing it has to say, that this
 * database's pqrun SQL objects are of a version the library does not
 * serve (pg/installed.hpp): the worker then waits for the update, looking
 * again every round. */
void
NotServed(MemoryContext keep)
{
	const char *said = installed::Describe();
	if (not_served_said != nullptr && strcmp(said, not_served_said) == 0)
		return;
	ereport(WARNING, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
	                  errmsg("pqrun maintenance waits: %s", said),
	                  errhint("%s", installed::Hint())));
	if (not_served_said != nullptr)
		pfree(not_served_said);
	not_served_said = MemoryContextStrdup(keep, said);
}

/* The parts of a round (maintenance.hpp). */
void
LivePart()
{
	(void)maintenance::RunLive();
}

void
RetentionPart()
{
	(void)maintenance::ApplyRetention();
}

/* RoundStep runs `part` of a round in a transaction of its own; on Citus,
 * on shard `shard` (0: the node's own tables). */
void
RoundStep(int64 shard, void (*part)())
{
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
	if (shard != 0)
		citus::EnterShard(shard);
	part();
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* When the next count of the unfinished jobs is due (CountStep). */
TimestampTz next_count = 0;

/* CountStep counts the unfinished jobs for pqrun.queue_overview
 * (maintenance::CountLive), as a step of its own, once
 * pqrun.count_interval has passed since the last count ended and twenty
 * times as long as that count took: a count reads all of job_live, so its
 * share of a core stays under 5 % however large the backlog grows. */
void
CountStep()
{
	TimestampTz started = GetCurrentTimestamp();
	if (pqrun_count_interval <= 0 || started < next_count)
		return;
	pgstat_report_activity(STATE_RUNNING, "pqrun count of unfinished jobs");
	RoundStep(0, maintenance::CountLive);
	TimestampTz ended = GetCurrentTimestamp();
	next_count = ended + Max(static_cast<int64>(pqrun_count_interval) * 1000, 20 * (ended - started));
}

/* RunRound does one maintenance round, each part in a transaction of its
 * own (maintenance.hpp). On Citus (pg/citus.hpp) it does one for each shard
 * of pqrun.job_live this node holds, so that each shard has its round on
 * one node: the one that holds it. */
Round
RunRound()
{
	MemoryContext round_context = CurrentMemoryContext;
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	bool installed = OidIsValid(get_extension_oid("pqrun", true));
	bool served = installed && pqrun::installed::Served();
	if (installed && !served)
		NotServed(TopMemoryContext);
	bool distributed = served && pqrun_enabled && citus::JobTablesDistributed();
	int n = 0;
	int64 *shards = nullptr;
	if (distributed) {
		int64 *listed = citus::LocalShards(&n);
		shards = static_cast<int64 *>(MemoryContextAlloc(round_context, sizeof(int64) * Max(n, 1)));
		memcpy(shards, listed, sizeof(int64) * n);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (!installed)
		return Round::kNoExtension;
	if (!served)
		return Round::kNotServed;
	if (not_served_said != nullptr) {
		pfree(not_served_said);
		not_served_said = nullptr;
	}
	if (pqrun_enabled) {
		pgstat_report_activity(STATE_RUNNING, "pqrun maintenance round");
		if (!distributed) {
			RoundStep(0, LivePart);
			RoundStep(0, RetentionPart);
		}
		for (int i = 0; i < n; i++) {
			RoundStep(shards[i], LivePart);
			RoundStep(shards[i], RetentionPart);
		}
		/* Not on Citus: each node would count every shard
		 * (pqrun.queue_overview is empty there; queue_stats counts). */
		if (!distributed)
			CountStep();
	}
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, nullptr);
	return Round::kDone;
}

void
MaintenanceMain(Datum arg)
{
	int slot_index = DatumGetInt32(arg);
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr || slot_index < 0 || slot_index >= shmem::kMaxDatabases)
		proc_exit(1);
	my_slot = &shared->slots[slot_index];

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	Oid dboid = my_slot->dboid;
	TimestampTz grace_until = my_slot->grace_until;
	uint32 registrations_seen = my_slot->registrations;
	bool wanted = my_slot->state == SlotState::kStarting;
	if (wanted) {
		my_slot->state = SlotState::kRunning;
		my_slot->pid = MyProcPid;
		my_slot->latch = MyLatch;
	}
	LWLockRelease(shared->lock);
	if (!wanted) {
		elog(DEBUG1, "pqrun maintenance: slot %d is not waiting for a worker", slot_index);
		proc_exit(0);
	}

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	OverrideSessionDefaults();
	pgstat_report_appname("pqrun maintenance");

	MemoryContext loop_context =
	    AllocSetContextCreate(TopMemoryContext, "pqrun maintenance loop", ALLOCSET_DEFAULT_SIZES);
	long error_backoff_ms = 0;
	for (;;) {
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending) {
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		if (AskedToStepAside()) {
			/* The slot keeps kStepAside; the launcher comes back later. */
			LWLockAcquire(shared->lock, LW_EXCLUSIVE);
			LeaveSlot(SlotState::kStepAside);
			LWLockRelease(shared->lock);
			proc_exit(0);
		}

		volatile Round round = Round::kDone;
		volatile bool failed = false;
		MemoryContextSwitchTo(loop_context);
		PG_TRY();
		{
			round = RunRound();
		}
		PG_CATCH();
		{
			MemoryContextSwitchTo(loop_context);
			ErrorData *edata = CopyErrorData();
			if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE) {
				/* A wait given up (lock_timeout above): not a failure. */
				FlushErrorState();
				ereport(LOG, (errmsg("pqrun maintenance round put off: %s", edata->message)));
			} else {
				EmitErrorReport();
				FlushErrorState();
				failed = true;
			}
			AbortCurrentTransaction();
		}
		PG_END_TRY();
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(loop_context);

		/* Rounds fall on multiples of reap_interval (not reap_interval after
		 * the last round ended), so they do not drift and a schedule due
		 * every interval is never found with two slots due in one round. */
		long naptime = pqrun_reap_interval - (GetCurrentTimestamp() / 1000) % pqrun_reap_interval;
		if (round != Round::kNoExtension && !failed)
			grace_until = 0; /* seen installed: from now on, absent means dropped */
		if (round == Round::kNoExtension) {
			/* A just-registered database: CREATE EXTENSION may not have
			 * committed yet. Otherwise there is nothing for us here. */
			if (LeaveIfAbsent(&registrations_seen, &grace_until))
				proc_exit(0);
			naptime = kGracePollMs;
		}
		if (failed) {
			error_backoff_ms = error_backoff_ms == 0 ? naptime : Min(error_backoff_ms * 2, kMaxErrorBackoffMs);
			naptime = error_backoff_ms;
		} else {
			error_backoff_ms = 0;
		}
		(void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, naptime,
		                compat::ExtensionWaitEvent(maintenance_main_wait_event, "PqrunMaintenanceMain"));
		ResetLatch(MyLatch);
	}
}

} // namespace

} // namespace pqrun::bgw

extern "C" PGDLLEXPORT void
pqrun_maintenance_main(Datum arg)
{
	pqrun::GuardedEntry([arg]() { pqrun::bgw::MaintenanceMain(arg); });
}
