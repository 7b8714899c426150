/* src/bgw/maintenance.cpp — one maintenance round: what the background worker
 * runs every pqrun.reap_interval, and pqrun.run_maintenance() on demand.
 *
 * It reaps stale jobs, rescues those whose holder exited, fires due
 * schedules, releases dependents a finish left behind, promotes delayed jobs
 * that fell due, resets the pickup hint from the index, forgets the keyed
 * queues that hold no keyed job any more (keyed_queues.hpp) and applies
 * retention, in one transaction, with the job operations (src/jobs/) and
 * the schedules (schedule.cpp); rows are locked in id order as everywhere.
 */
#include "bgw/maintenance.hpp"

#include "guc.hpp"
#include "jobs/keyed_queues.hpp"
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"
#include "jobs/schedule.hpp"
#include "pg/citus.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"
#include "shmem/shmem.hpp"
#include "shmem/stats.hpp"
#include "xact/next_due.hpp"
#include "xact/wake.hpp"

namespace pqrun::maintenance {

namespace stmts {

/* The true first pickup key, for the maintenance round's hint backstop:
 * the head of job_live_pick, under that index's own condition (without
 * the key's part, each round read and sorted all of job_live). */
spi::Statement kPickHead{
    "pick head",
    "SELECT -(priority::bigint), id FROM pqrun.job_live WHERE status = 'READY' AND NOT delayed" PQRUN_UNKEYED
    " ORDER BY (-(priority::bigint)), id LIMIT 1",
    0,
    {}};

/* Dependency edges whose dependency has already finished: the backstop for
 * anything the synchronous unblocking in mark_done/mark_error missed. */
/* The dependencies of the 1,000 edges after dependency $1 (job_dep's key),
 * each with its status when it has finished (NULL: not yet), and how many
 * edges the window held: a round looks at these only (RunLive). */
constexpr int kEdgesWindow = 1000;
spi::Statement kStrandedEdges{
    "stranded edges",
    "WITH w AS (SELECT dep_id FROM pqrun.job_dep WHERE dep_id > $1 ORDER BY dep_id LIMIT 1000)"
    " SELECT d.dep_id, f.status::text, (SELECT pg_catalog.count(*) FROM w)"
    "   FROM (SELECT DISTINCT dep_id FROM w) d LEFT JOIN pqrun.job_done f ON f.id = d.dep_id ORDER BY d.dep_id",
    1,
    {INT8OID}};

/* The BLOCKED jobs after id $1, 1,000 in id order (job_live_blocked), each
 * with 'stranded' when it has nothing left to wait for: no dependency, and
 * no other member of its FIFO group running, READY or ahead of it. A
 * BLOCKED member of a FIFO group also waits while another member runs or is
 * READY: one put back by retry() has a lower id than the one running,
 * which release() after a finish never meets (it releases the group's
 * lowest member once the running one is gone). */
constexpr int kBlockedWindow = 1000;
spi::Statement kStrandedBlocked{
    "stranded blocked",
    "WITH w AS (SELECT id, fifo_key FROM pqrun.job_live WHERE status = 'BLOCKED' AND id > $1 ORDER BY id LIMIT 1000)"
    " SELECT w.id, CASE WHEN NOT EXISTS (SELECT 1 FROM pqrun.job_dep d WHERE d.job_id = w.id)"
    "   AND (w.fifo_key IS NULL OR NOT EXISTS (SELECT 1 FROM pqrun.job_live o"
    "        WHERE o.fifo_key = w.fifo_key AND o.id <> w.id AND (o.id < w.id OR o.status <> 'BLOCKED')))"
    "   THEN 'stranded' END FROM w ORDER BY w.id",
    1,
    {INT8OID}};

/* The RUNNING jobs after id $1, jobs::kRunningWindow of them in id order
 * (job_live_running), with their holders (NULL: held by the lease alone). */
spi::Statement kRunningHolders{"running holders",
                               "SELECT id, holder_pid, fifo_key, " PQRUN_SELECT_HOLDER_STARTED " FROM pqrun.job_live"
                               " WHERE status = 'RUNNING' AND id > $1 ORDER BY id LIMIT 1000",
                               1,
                               {INT8OID}};

spi::Statement kLockOrphan{"lock orphan",
                           "SELECT attempts >= max_attempts FROM pqrun.job_live"
                           " WHERE id = $1 AND status = 'RUNNING' AND holder_pid = $2" PQRUN_SAME_HOLDER_STARTED
                           " FOR UPDATE SKIP LOCKED",
                           3,
                           {INT8OID, INT4OID, TIMESTAMPTZOID}};

/* Jobs a restore (pg_dump keeps them) wrote with their own ids, before
 * the dump's setval of the sequence: new ids must start above them. They
 * start a million above: a job that takes one of them before the restore
 * ends (a schedule firing) must not be reached again by the ids the
 * restore's setval hands out once more, before the next round sees the
 * sequence behind again and moves it past that job. */
spi::Statement kIdsAhead{"ids ahead",
                         "SELECT pg_catalog.setval('pqrun.job_id_seq', ids.top + 1000000)"
                         "  FROM (SELECT GREATEST((SELECT pg_catalog.max(id) FROM pqrun.job_live),"
                         "                        (SELECT pg_catalog.max(id) FROM pqrun.job_done)) AS top) AS ids,"
                         "       pqrun.job_id_seq AS seq"
                         " WHERE ids.top >= CASE WHEN seq.is_called THEN seq.last_value + 1 ELSE seq.last_value END",
                         0,
                         {}};

/* Retention of a Citus shard of job_done (pg/citus.hpp), whose partitions
 * are not made: FAILED jobs are kept for $3 (NULL: for ever). */
spi::Statement kShardRetention{
    "shard retention",
    "WITH gone AS (DELETE FROM pqrun.job_done WHERE id = ANY (ARRAY("
    "   SELECT id FROM pqrun.job_done"
    "    WHERE finished_at < pg_catalog.now() - CASE WHEN status = 'FAILED' THEN $3 ELSE $1 END LIMIT $2))"
    "   RETURNING id, queue, job_type, status),"
    " history AS (DELETE FROM pqrun.attempt_log a USING gone WHERE a.job_id = gone.id)"
    " SELECT queue, job_type, status::text, pg_catalog.count(*) FROM gone GROUP BY 1, 2, 3",
    3,
    {INTERVALOID, INT4OID, INTERVALOID}};

/* The count behind pqrun.queue_overview (0.21.0). */
spi::Statement kCountLive{"count live", "SELECT pqrun._count_live_jobs()", 0, {}};

/* One round at a time applies retention in a database: two would deadlock
 * over job_done's partitions. run_maintenance() waits for its turn (its
 * caller may count on the partitions it makes); the worker, which holds the
 * rows its round locked meanwhile, never waits: a transaction that called
 * run_maintenance() and then waits for one of those rows would deadlock
 * with it. It skips retention for that round instead. */
spi::Statement kRetentionTurn{"retention turn", "SELECT true FROM pg_catalog.pg_advisory_xact_lock(1886483058, 1)", 0,
                              {}};
spi::Statement kRetentionTurnIfFree{"retention turn if free",
                                    "SELECT pg_catalog.pg_try_advisory_xact_lock(1886483058, 1)", 0, {}};

/* Partitions made and dropped (pqrun._history_round, pqrun.sql). */
spi::Statement kHistoryRound{"history round",
                             "SELECT queue, job_type, status, jobs FROM pqrun._history_round($1, $2, $3, $4, $5)",
                             5,
                             {TIMESTAMPTZOID, INTERVALOID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID}};

/* Retention of what job_done_default holds (jobs finished before their
 * partition was made) but its FAILED jobs, in finish order. */
spi::Statement kRetentionDefault{
    "retention default",
    "WITH gone AS (DELETE FROM pqrun.job_done_default WHERE id = ANY (ARRAY("
    "   SELECT id FROM pqrun.job_done_default WHERE finished_at < pg_catalog.now() - $1 AND status <> 'FAILED'"
    "    ORDER BY finished_at LIMIT $2))"
    "   RETURNING id, queue, job_type, status),"
    " history AS (DELETE FROM pqrun.attempt_log a USING gone WHERE a.job_id = gone.id)"
    " SELECT queue, job_type, status::text, pg_catalog.count(*) FROM gone GROUP BY 1, 2, 3",
    2,
    {INTERVALOID, INT4OID}};

/* Retention of FAILED jobs, in every partition (by its index of them). */
spi::Statement kRetentionFailed{
    "retention failed",
    "WITH gone AS (DELETE FROM pqrun.job_done WHERE id = ANY (ARRAY("
    "   SELECT id FROM pqrun.job_done WHERE status = 'FAILED' AND finished_at < pg_catalog.now() - $1"
    "    ORDER BY finished_at LIMIT $2)) AND status = 'FAILED'"
    "   RETURNING id, queue, job_type, status),"
    " history AS (DELETE FROM pqrun.attempt_log a USING gone WHERE a.job_id = gone.id)"
    " SELECT queue, job_type, status::text, pg_catalog.count(*) FROM gone GROUP BY 1, 2, 3",
    2,
    {INTERVALOID, INT4OID}};

} // namespace stmts

using namespace spi;
using namespace jobs;

namespace {

constexpr int kRetentionBatch = 10000;

/* Partitions of job_done made ahead of the one for now. */
constexpr int kPartitionsAhead = 2;

/* Seconds(s) is an interval of `s` seconds. */
Interval *
Seconds(int64 s)
{
	auto *interval = static_cast<Interval *>(palloc0(sizeof(Interval)));
	interval->time = s * USECS_PER_SEC;
	return interval;
}

/* HolderAlive answers whether the session that holds a running job, the
 * backend of this database with process id `pid` that started at `started`
 * (NULL for claims made before 0.5.0), is still there. A live process id
 * alone does not say so: ids are reused, and a server restarted after a
 * crash (in a fresh container, after a reboot) or a restored dump often has
 * a backend with the very id the holder had; a dump restored into another
 * database of the same server names a holder that lives on, connected to
 * the database the dump was taken from. The caller has read the job rows
 * before this transaction's snapshot of the backend status table is taken
 * (an older one could show an earlier process with the id and rescue a held
 * job). */
bool
HolderAlive(int32 pid, Datum started, bool started_null)
{
	PGPROC *proc = BackendPidGetProc(pid);
	if (proc == nullptr || proc->databaseId != MyDatabaseId)
		return false;
	if (started_null)
		return true;
	int n = pgstat_fetch_stat_numbackends();
	for (int i = 1; i <= n; i++) {
		LocalPgBackendStatus *local = compat::LocalBackendStatus(i);
		if (local != nullptr && local->backendStatus.st_procpid == pid)
			return local->backendStatus.st_proc_start_timestamp == DatumGetTimestampTz(started);
	}
	return true; /* starting or exiting: the next round looks again */
}

/* RescueOrphans puts back running jobs held by a session (claimed under
 * pqrun.claim_hold = session: the backend that picked them up or last sent
 * a heartbeat) that has exited. A job held by its lease alone has no holder
 * and waits for its stale window. */
int64
RescueOrphans(int64 *after)
{
	Datum window_values[1] = {Int64GetDatum(*after)};
	uint64 n = Exec(stmts::kRunningHolders, window_values, nullptr, SPI_OK_SELECT);
	*after = n < static_cast<uint64>(jobs::kRunningWindow) ? 0 : ColInt64(n - 1, 1);
	int64 *ids = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	int32 *pids = static_cast<int32 *>(palloc(sizeof(int32) * (n + 1)));
	Datum *started = static_cast<Datum *>(palloc(sizeof(Datum) * (n + 1)));
	bool *started_null = static_cast<bool *>(palloc(sizeof(bool) * (n + 1)));
	char **fifo_keys = static_cast<char **>(palloc(sizeof(char *) * (n + 1)));
	uint64 orphans = 0;
	/* Taken again at the first lookup, after the rows above. */
	pgstat_clear_backend_activity_snapshot();
	for (uint64 i = 0; i < n; i++) {
		bool isnull;
		int32 pid = DatumGetInt32(Col(i, 2, &isnull));
		if (isnull)
			continue; /* held by its lease alone */
		bool no_start;
		Datum start = Col(i, 4, &no_start);
		if (HolderAlive(pid, start, no_start))
			continue;
		started[orphans] = start;
		started_null[orphans] = no_start;
		ids[orphans] = ColInt64(i, 1);
		fifo_keys[orphans] = ColText(i, 3);
		pids[orphans++] = pid;
	}
	int64 rescued = 0;
	const char *error = "orphaned: the backend holding the job exited";
	LockFifoGroups(fifo_keys, static_cast<int>(orphans));
	for (uint64 i = 0; i < orphans; i++) {
		Datum values[3] = {Int64GetDatum(ids[i]), Int32GetDatum(pids[i]), started[i]};
		char nulls[3] = {' ', ' ', started_null[i] ? 'n' : ' '};
		if (Exec(stmts::kLockOrphan, values, nulls, SPI_OK_SELECT) == 0)
			continue;
		if (ColBool(0, 1))
			FinishRunning(ids[i], Datum(0), false, JobStatus::kFailed, "orphaned", error, Datum(0), true);
		else
			Requeue(ids[i], GetCurrentTransactionStartTimestamp(), error, "orphaned");
		rescued++;
	}
	return rescued;
}

/* Where each round's looks at BLOCKED and at RUNNING jobs and at
 * dependency edges go on: a round reads a window of each from there, in id
 * order, wrapping round, so that it costs as much beside a million BLOCKED
 * jobs or edges or a hundred thousand RUNNING jobs as beside a thousand,
 * and every one is looked at within their number / the window's rounds. Kept in the database's slot of
 * shared memory (shmem.hpp), and per shard in the worker on Citus (a few
 * shards; the others start again from the first). Without shared memory
 * there is no worker, and run_maintenance() reads every window in turn. */
struct ShardCursors {
	int64 shard;
	shmem::RoundCursors at;
};
ShardCursors shard_cursors[16];
int next_shard_cursors = 0;

/* LoadCursors answers where the rounds of `shard` go on; false when
 * nothing keeps that (no shared memory). */
bool
LoadCursors(int64 shard, shmem::RoundCursors *at)
{
	*at = shmem::RoundCursors{};
	if (shard != 0) {
		for (const ShardCursors &c : shard_cursors)
			if (c.shard == shard)
				*at = c.at;
		return true;
	}
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr)
		return false;
	bool kept = false;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const shmem::DatabaseSlot &s : shared->slots)
		if (s.state != shmem::SlotState::kFree && s.dboid == MyDatabaseId) {
			*at = s.cursors;
			kept = true;
		}
	LWLockRelease(shared->lock);
	return kept;
}

void
StoreCursors(int64 shard, const shmem::RoundCursors &at)
{
	if (shard != 0) {
		for (ShardCursors &c : shard_cursors)
			if (c.shard == shard) {
				c.at = at;
				return;
			}
		shard_cursors[next_shard_cursors] = ShardCursors{shard, at};
		next_shard_cursors = (next_shard_cursors + 1) % lengthof(shard_cursors);
		return;
	}
	shmem::SharedState *shared = shmem::Shared();
	if (shared == nullptr)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (shmem::DatabaseSlot &s : shared->slots)
		if (s.state != shmem::SlotState::kFree && s.dboid == MyDatabaseId)
			s.cursors = at;
	LWLockRelease(shared->lock);
}

/* FinishEdges finishes the edges of the dependencies in the window of
 * edges after *after that have finished, and moves *after on. */
void
FinishEdges(int64 *after)
{
	Datum window_values[1] = {Int64GetDatum(*after)};
	uint64 n = Exec(stmts::kStrandedEdges, window_values, nullptr, SPI_OK_SELECT);
	bool full = n > 0 && ColInt64(0, 3) == stmts::kEdgesWindow;
	IdList edges = CopyIds(n, true);
	*after = full ? edges.ids[n - 1] : 0;
	for (uint64 i = 0; i < edges.count; i++)
		if (edges.labels[i] != nullptr)
			AfterFinish(edges.ids[i], ParseStatus(edges.labels[i]), true, nullptr);
}

/* UnblockWindow releases the BLOCKED jobs of the window after *after that have
 * nothing left to wait for, and moves *after on. */
int64
UnblockWindow(int64 *after)
{
	Datum window_values[1] = {Int64GetDatum(*after)};
	IdList window = CopyIds(Exec(stmts::kStrandedBlocked, window_values, nullptr, SPI_OK_SELECT), true);
	*after = window.count < static_cast<uint64>(stmts::kBlockedWindow) ? 0 : window.ids[window.count - 1];
	int64 unblocked = 0;
	for (uint64 i = 0; i < window.count; i++)
		if (window.labels[i] != nullptr)
			unblocked += jobs::Unblock(window.ids[i]) ? 1 : 0;
	return unblocked;
}

} // namespace

/* ApplyRetention removes the finished jobs that pqrun.retention and
 * pqrun.failed_retention no longer keep and answers how many: by dropping
 * the partitions of job_done that ended before (docs/operations.md,
 * "History and retention"), which it also makes ahead of time, and by
 * DELETE from job_done_default and of FAILED jobs kept less long than the
 * rest. */
int64
ApplyRetention()
{
	int64 failed_keep = pqrun_failed_retention < 0 ? pqrun_retention : pqrun_failed_retention;
	int64 removed = 0;
	if (citus::InShards()) {
		if (pqrun_retention > 0) {
			Datum values[3] = {PointerGetDatum(Seconds(pqrun_retention)), Int32GetDatum(kRetentionBatch),
			                   PointerGetDatum(Seconds(failed_keep))};
			removed = NoteRemoved(Exec(stmts::kShardRetention, values, failed_keep == 0 ? "  n" : nullptr,
			                           SPI_OK_SELECT));
		}
		return removed;
	}
	Exec(compat::InBackgroundWorker() ? stmts::kRetentionTurnIfFree : stmts::kRetentionTurn, nullptr, nullptr, SPI_OK_SELECT);
	if (!ColBool(0, 1))
		return 0;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	Datum values[5] = {TimestampTzGetDatum(now), PointerGetDatum(Seconds(pqrun_history_interval)),
	                   Int32GetDatum(kPartitionsAhead), 0, 0};
	char nulls[6] = "   nn";
	if (pqrun_retention > 0) {
		values[3] = TimestampTzGetDatum(now - pqrun_retention * USECS_PER_SEC);
		nulls[3] = ' ';
		if (failed_keep == 0 || failed_keep > pqrun_retention) {
			values[4] = TimestampTzGetDatum(failed_keep == 0 ? DT_NOBEGIN : now - failed_keep * USECS_PER_SEC);
			nulls[4] = ' ';
		}
	}
	/* The DELETEs first: once the round has changed partitions, job_done
	 * stays locked until the commit, and nothing after it may wait for a
	 * row a session holds while that session waits for job_done. */
	Datum batch = Int32GetDatum(kRetentionBatch);
	if (pqrun_retention > 0) {
		Datum keep[2] = {PointerGetDatum(Seconds(pqrun_retention)), batch};
		removed += NoteRemoved(Exec(stmts::kRetentionDefault, keep, nullptr, SPI_OK_SELECT));
	}
	if (failed_keep > 0) {
		Datum keep[2] = {PointerGetDatum(Seconds(failed_keep)), batch};
		removed += NoteRemoved(Exec(stmts::kRetentionFailed, keep, nullptr, SPI_OK_SELECT));
	}
	removed += NoteRemoved(Exec(stmts::kHistoryRound, values, nulls, SPI_OK_SELECT));
	return removed;
}

Counts
RunLive()
{
	Counts counts{};
	/* On a Citus shard (pg/citus.hpp): ids come from this node's range,
	 * which a shard moved here from another node is above; the schedules
	 * that fire are those of the shard's queues, the pickup hint is off,
	 * and retention deletes. */
	bool shard = citus::InShards();
	/* Before anything here takes a new id (a schedule firing). */
	if (!shard)
		Exec(stmts::kIdsAhead, nullptr, nullptr, SPI_OK_SELECT);
	shmem::RoundCursors at;
	bool windowed = LoadCursors(citus::ShardOf(), &at);
	Interval stale_after{};
	stale_after.time = static_cast<int64>(pqrun_stale_timeout) * USECS_PER_SEC;
	counts.reaped = jobs::ReapStale(&stale_after, windowed ? &at.stale_after : nullptr);
	if (pqrun_orphan_rescue)
		do
			counts.orphaned += RescueOrphans(&at.orphan_after);
		while (!windowed && at.orphan_after != 0);
	counts.scheduled = schedule::FireDue();

	/* Backstop for unblocking: edges whose dependency already finished, and
	 * BLOCKED jobs with nothing left to wait for. */
	do
		FinishEdges(&at.edges_after);
	while (!windowed && at.edges_after != 0);
	do
		counts.unblocked += UnblockWindow(&at.blocked_after);
	while (!windowed && at.blocked_after != 0);
	StoreCursors(citus::ShardOf(), at);
	stats::Rescued(counts.reaped, counts.orphaned);

	counts.promoted = static_cast<int64>(PromoteDue(PickFilter{}, 1000));
	/* Pickups skip promoting until then (wake.hpp). */
	LearnNextDue(next_due::Read());
	/* Backstop for the pickup hint: whatever became READY without telling
	 * (a manual UPDATE, say) is found within a round. */
	if (!shard && Exec(stmts::kPickHead, nullptr, nullptr, SPI_OK_SELECT) > 0)
		pick_hint::Lower(pick_hint::PickKey{ColInt64(0, 1), ColInt64(0, 2)});
	/* Queues no longer keyed stop costing pickups a look at their lanes. */
	if (!shard)
		(void)keyed_queues::ForgetIdle();
	return counts;
}

int32
ReapStale(const Interval *default_stale_after)
{
	shmem::RoundCursors at;
	if (!LoadCursors(citus::ShardOf(), &at))
		return jobs::ReapStale(default_stale_after);
	int32 reaped = jobs::ReapStale(default_stale_after, &at.stale_after);
	StoreCursors(citus::ShardOf(), at);
	stats::Rescued(reaped, 0);
	return reaped;
}

void
CountLive()
{
	Exec(stmts::kCountLive, nullptr, nullptr, SPI_OK_SELECT);
}

Counts
Run()
{
	/* The turn first, waited for while this call holds nothing of job_done
	 * yet: the live part's finishes of stale jobs take it, and a worker's
	 * round that holds the turn waits for job_done. */
	Exec(stmts::kRetentionTurn, nullptr, nullptr, SPI_OK_SELECT);
	Counts counts = RunLive();
	/* Last: a partition dropped keeps job_done locked until the commit. */
	counts.purged = ApplyRetention();
	return counts;
}

} // namespace pqrun::maintenance
