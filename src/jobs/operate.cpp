/* src/jobs/operate.cpp — an operator's actions on jobs: cancel, retry of a
 * finished job, purge of history. */
#include "jobs/flow_control.hpp"
#include "jobs/job_row.hpp"
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"
#include "pg/citus.hpp"

#include "pg/spi_rows.hpp"
#include "shmem/stats.hpp"
#include "xact/wake.hpp"

namespace pqrun::jobs {

namespace stmts {

#define RETRY_FINISHED                                                                                                 \
	"WITH gone AS (DELETE FROM pqrun.job_done WHERE id = $1 AND status IN ('FAILED', 'CANCELLED') RETURNING *),"     \
	" logged AS ("                                                                                                   \
	"  INSERT INTO pqrun.attempt_log (job_id, attempt, started_at, finished_at, worker_id, outcome, error)"          \
	"  SELECT id, attempts, locked_at, finished_at, locked_by, outcome, last_error FROM gone"                        \
	"   WHERE outcome IS NOT NULL)"                                                                                  \
	" INSERT INTO pqrun.job_live (id, status, priority, attempts, max_attempts, timeout_seconds, run_after,"         \
	"   created_at, updated_at, queue, job_type, dedupe_key, fifo_key, depends_on, last_error, payload"             \
	    PQRUN_JOB_CONTROLS ")"                                                                                       \
	" SELECT id, $2::pqrun.job_status, priority, attempts, max_attempts, timeout_seconds, pg_catalog.now(),"        \
	"   created_at, pg_catalog.now(), queue, job_type, dedupe_key, fifo_key, depends_on, last_error, payload"       \
	    PQRUN_JOB_CONTROLS " FROM gone RETURNING queue, job_type, priority, id"
/* A retried job keeps everything it had but what its last claim wrote: it
 * is READY or BLOCKED again, not running nor held. */
static_assert(job_row::ListIs(RETRY_FINISHED, "INSERT INTO pqrun.job_live (",
                              job_row::InTable(job_row::kLive) &
                                  ~job_row::Named({"delayed", "has_dependents", "locked_at", "locked_by", "lease_token",
                                                   "holder_pid", "heartbeat_at", "holder_started"})),
              "retry must copy back every job_live column of job_row::kColumns it does not leave out");
spi::Statement kRetryFinished{"retry finished", RETRY_FINISHED, 2, {INT8OID, TEXTOID}};

spi::Statement kDedupeHolder{
    "dedupe holder",
    "SELECT l.id FROM pqrun.job_done d JOIN pqrun.job_live l ON l.dedupe_key = d.dedupe_key WHERE d.id = $1",
    1,
    {INT8OID}};

spi::Statement kPurge{"purge",
                      "WITH gone AS (DELETE FROM pqrun.job_done WHERE status::text = ANY ($2::text[])"
                      "   AND finished_at < pg_catalog.now() - $1 RETURNING id, queue, job_type, status),"
                      " history AS (DELETE FROM pqrun.attempt_log a USING gone WHERE a.job_id = gone.id)"
                      " SELECT queue, job_type, status::text, pg_catalog.count(*) FROM gone GROUP BY 1, 2, 3",
                      2,
                      {INTERVALOID, TEXTOID}};

} // namespace stmts

using namespace spi;

/* NoteRemoved counts the finished jobs a purge or retention statement
 * deleted (rows of queue, job_type, status, count) and answers how many. */
int64
NoteRemoved(uint64 n)
{
	int64 total = 0;
	for (uint64 i = 0; i < n; i++) {
		stats::Finished finished;
		int64 count = ColInt64(i, 4);
		total += count;
		if (stats::FinishedOf(ParseStatus(ColText(i, 3)), &finished))
			stats::FinishedRemoved(ColText(i, 1), ColText(i, 2), finished, count);
	}
	return total;
}

bool
Cancel(int64 job_id, const char *reason)
{
	citus::EnterJob(job_id);
	if (IsFinished(StateOf(job_id).status))
		return false;
	if (!FinishLive(job_id, JobStatus::kCancelled, "cancelled", reason ? ClipError(reason) : "cancelled"))
		return false;
	/* A running job's worker waiting in its heartbeat learns it at commit. */
	wake::NoteLeaseEnded(job_id);
	return true;
}

bool
Retry(int64 job_id)
{
	citus::EnterJob(job_id);
	JobState was = StateOf(job_id);
	Datum values[2] = {Int64GetDatum(job_id), Datum(0)};
	if (was.status != JobStatus::kFailed && was.status != JobStatus::kCancelled)
		return false;
	if (Exec(stmts::kDedupeHolder, values, nullptr, SPI_OK_SELECT) > 0)
		ereport(ERROR, (errcode(ERRCODE_UNIQUE_VIOLATION),
		                errmsg("job %lld cannot be retried while job %lld holds its dedupe key", (long long)job_id,
		                       (long long)ColInt64(0, 1))));
	/* Its queue may have been forgotten as keyed since it finished; marked
	 * before its group is locked, as an enqueue marks it. */
	if (was.keyed_queue)
		flow_control::NoteKeyed(CStringGetTextDatum(was.keyed_queue));
	bool blocked = false;
	if (was.fifo_key) {
		LockFifoGroup(was.fifo_key);
		Datum key[1] = {CStringGetTextDatum(was.fifo_key)};
		blocked = Exec(stmts::kFifoBusy, key, nullptr, SPI_OK_SELECT, 1) > 0;
	}
	values[1] = CStringGetTextDatum(StatusName(blocked ? JobStatus::kBlocked : JobStatus::kReady));
	if (Exec(stmts::kRetryFinished, values, nullptr, SPI_OK_INSERT_RETURNING) == 0)
		return false;
	char *queue = ColText(0, 1), *job_type = ColText(0, 2);
	bool isnull;
	pick_hint::PickKey key = pick_hint::KeyOf(DatumGetInt32(Col(0, 3, &isnull)), ColInt64(0, 4));
	stats::Finished counted;
	if (stats::FinishedOf(was.status, &counted))
		stats::FinishedRemoved(queue, job_type, counted, 1);
	if (!blocked)
		wake::NoteReady(queue, job_type, key);
	return true;
}

int64
Purge(const Interval *older_than, const char *statuses_literal)
{
	Datum values[2] = {PointerGetDatum(older_than), CStringGetTextDatum(statuses_literal)};
	return NoteRemoved(Exec(stmts::kPurge, values, nullptr, SPI_OK_SELECT));
}

} // namespace pqrun::jobs
