/* src/jobs/queue.hpp — the transactional job lifecycle: the operations of
 * src/jobs/ that the SQL API and the maintenance round call.
 *
 * Every function here runs inside the caller's transaction, must be called
 * while connected to SPI, and raises PostgreSQL errors (with the SQLSTATEs
 * docs/api.md documents) for bad input or a lost lease. Strings are palloc'd C strings or
 * text datums in the current memory context.
 */
#pragma once

#include "pg/pg.hpp"

#include "jobs/job_status.hpp"
#include "jobs/pick_filter.hpp"

namespace pqrun::jobs {

/* Arguments of pqrun.enqueue, in its SQL argument order. */
enum EnqueueArg {
	kJobType,
	kPayload,
	kPriority,
	kRunAfter,
	kMaxAttempts,
	kTimeoutSeconds,
	kDedupeKey,
	kQueue,
	kDependsOn,
	kFifoKey,
	kConcurrencyKey,
	kRateWeight,
	kEnqueueArgCount
};

struct EnqueueArgs {
	Datum value[kEnqueueArgCount];
	bool isnull[kEnqueueArgCount];
};

/* The queue of a job enqueued without one. */
constexpr const char *kDefaultQueue = "default";

/* SetEnqueueDefaults fills args with the SQL defaults of pqrun.enqueue
 * (job_type NULL); jsonb/text values are allocated in the current context. */
void SetEnqueueDefaults(EnqueueArgs *args);

/* RunAfter answers a job's run_after: now() when it is NULL. */
TimestampTz RunAfter(const EnqueueArgs &args);

/* Enqueue validates and writes one job, answering its id (or the id of the
 * unfinished job that already holds its dedupe key). `element` > 0 names the
 * enqueue_batch element in error messages. */
int64 Enqueue(const EnqueueArgs &args, int element);

/* EnqueueBatch writes the jobs of enqueue_batch's JSON array and appends
 * their ids (bigint rows) to `out`, in element order. */
void EnqueueBatch(Jsonb *jobs, Tuplestorestate *out, TupleDesc out_desc);

/* PickUp claims up to batch_size runnable jobs for worker_id, waiting up to
 * wait_ms for one to appear, and appends them (as pqrun.jobs rows) to `out`. */
uint64 PickUp(text *worker_id, const PickFilter &filter, int32 batch_size, int64 wait_ms,
              Tuplestorestate *out, TupleDesc out_desc);

/* AwaitJobs waits up to wait_ms for a runnable job matching the filters,
 * committing before each sleep so no snapshot is held while waiting.
 * Needs a non-atomic SPI connection (CALL). */
bool AwaitJobs(const PickFilter &filter, int64 wait_ms);

/* The mark functions take a NULL lease (Datum 0 with has_lease false) to
 * skip fencing. */
void MarkDone(int64 job_id, Datum result, bool result_null, Datum lease, bool has_lease);
/* MarkDoneBatch marks every job of job_ids done (fenced by the lease of the
 * same position when lease_tokens is given) or raises as mark_done would,
 * and answers how many it marked. */
int32 MarkDoneBatch(ArrayType *job_ids, ArrayType *lease_tokens);
/* MarkDoneEach marks every job of job_ids done (fenced by the lease, and
 * with the result, of the same position when lease_tokens and results are
 * given) as mark_done would, in id order, and answers how many; without
 * results, several jobs are marked as MarkDoneBatch marks them. */
int32 MarkDoneEach(ArrayType *job_ids, ArrayType *lease_tokens, ArrayType *results);
/* MarkError answers the job's new status: FAILED, or READY for a retry. */
JobStatus MarkError(int64 job_id, const char *error, bool terminal, Datum lease, bool has_lease,
                    const Interval *retry_after);
/* GiveBack makes a running job READY again at `run_after` without using up
 * its attempt (release; a snooze also counts in its snoozes). */
void GiveBack(int64 job_id, Datum lease, bool has_lease, TimestampTz run_after, bool snooze);
/* Heartbeat renews the job's lease and stores `progress` unless null;
 * with `wait_ms`, first sleeps while the lease lasts (AwaitLeaseEnd), and
 * returns quietly if its worker finished the job meanwhile. */
void Heartbeat(int64 job_id, Datum lease, bool has_lease, Datum progress, bool has_progress, int64 wait_ms);

/* InQueue checks the jobs of `job_ids` (bigint[]) against the queue their
 * caller names (the job-id calls' last argument, 0.15.0): on Citus the
 * transaction enters that queue's shards, where Citus has delegated a call
 * through the coordinator by that argument (pg/citus.hpp); a job of another
 * queue is refused with P0002, as an unknown one. */
void InQueue(const char *queue, ArrayType *job_ids);

/* ReapStale puts back (or fails) the RUNNING jobs silent for longer than
 * their stale window: all of them, or, with `after`, those among the
 * kRunningWindow RUNNING jobs after id *after, which it moves on (0: from
 * the first again), so that a maintenance round costs as much beside
 * 100,000 running jobs as beside 1,000. */
constexpr int kRunningWindow = 1000;
int32 ReapStale(const Interval *default_stale_after, int64 *after = nullptr);
bool Cancel(int64 job_id, const char *reason);
bool Retry(int64 job_id);
int64 Purge(const Interval *older_than, const char *statuses_literal);

} // namespace pqrun::jobs
