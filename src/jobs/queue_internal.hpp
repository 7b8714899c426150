/* src/jobs/queue_internal.hpp — what the job operations (enqueue.cpp,
 * pick.cpp, finish.cpp, requeue.cpp, operate.cpp, queue.cpp) share with
 * each other and with maintenance.cpp.
 *
 * Not part of the queue's interface (queue.hpp); SPI must be connected.
 */
#pragma once

#include "jobs/job_status.hpp"
#include "jobs/pick_filter.hpp"
#include "pg/spi_plans.hpp"

namespace pqrun::jobs {

namespace stmts {
/* Whether FIFO group $1 has an unfinished job (queue.cpp). */
extern spi::Statement kFifoBusy;
} // namespace stmts

/* A job as StateOf found it. */
struct JobState {
	JobStatus status;
	bool has_lease;
	pg_uuid_t lease_token;
	char *fifo_key;    /* nullptr: none */
	char *keyed_queue; /* its queue when it has a concurrency key, else nullptr */
};

/* StateOf answers job `job_id`'s status, lease token, FIFO group and
 * keyed queue, raising P0002 for an unknown id. */
JobState StateOf(int64 job_id);

/* RaiseNotRunning explains why a mark/heartbeat matched no running job:
 * unknown id (P0002), not running or stale lease (55000). */
void RaiseNotRunning(int64 job_id, Datum lease, bool has_lease);

/* CompareIds orders job ids for qsort and bsearch. */
int CompareIds(const void *a, const void *b);

/* LockGroupOf takes the FIFO group lock of unfinished job `job_id` if it
 * belongs to a group, and answers whether it does. */
bool LockGroupOf(int64 job_id);

/* ClipError cuts an error or reason kept in last_error to its limit. */
const char *ClipError(const char *error);

/* FinishLive moves unfinished job `job_id` to job_done as `status`, whatever
 * its state, then follows up. Answers false if it was not unfinished. */
bool FinishLive(int64 job_id, JobStatus status, const char *outcome, const char *error);

/* Result layout of every statement that makes jobs READY: queue, job_type,
 * priority, id and, for some, delayed and run_after. */
enum class ReadyRows { kReady, kMaybeDelayed };

/* NoteRows reports each row of the last result as a job made READY (for
 * wake-ups, NOTIFY and the pickup hint), or as a delayed one. */
void NoteRows(uint64 n, ReadyRows layout);

/* LockFifoGroup takes the transaction-level advisory lock of a FIFO group;
 * see queue.cpp for the lock order. */
void LockFifoGroup(const char *fifo_key);

/* LockFifoGroups takes the locks of the groups named by `fifo_keys` (nulls
 * skipped) in the one order every caller uses, so that calls needing
 * several groups never wait for each other (40P01). */
void LockFifoGroups(char *const *fifo_keys, int n);

/* LockGroupsOf takes, as LockFifoGroups, the group locks of the unfinished
 * jobs among `ids` (nothing for fewer than two ids). */
void LockGroupsOf(const int64 *ids, int n);

/* PromoteDue makes up to `limit` delayed jobs whose run_after has passed,
 * optionally only of the given types and queues, runnable. */
uint64 PromoteDue(const PickFilter &filter, int32 limit);

/* LearnNextDue looks up when the earliest delayed job falls due, records it
 * as next_due unless a commit changed that from `seen` (read before this
 * call) meanwhile, and answers it (DT_NOEND for none). */
TimestampTz LearnNextDue(TimestampTz seen);

/* NoteRemoved counts the finished jobs a purge or retention statement
 * deleted (rows of queue, job_type, status, count) and answers how many. */
int64 NoteRemoved(uint64 n);

/* Unblock makes BLOCKED job `job_id` READY if it has no pending dependency
 * and heads its FIFO group; answers whether it did. */
bool Unblock(int64 job_id);

/* AfterFinish releases or cancels the dependents of a job that just
 * finished with `status` and lets the next job of its FIFO group run. */
void AfterFinish(int64 job_id, JobStatus status, bool has_dependents, const char *fifo_key);

/* FinishRunning ends the running attempt of `job_id` (fenced by the lease
 * when given) with `status`; raises if the job is not running. */
void FinishRunning(int64 job_id, Datum lease, bool has_lease, JobStatus status, const char *outcome, const char *error,
                   Datum result, bool result_null);

/* Requeue makes running job `job_id` READY again at `run_after` (delayed when
 * in the future), its attempt ended with `outcome` and `error`. */
void Requeue(int64 job_id, TimestampTz run_after, const char *error, const char *outcome);

} // namespace pqrun::jobs
