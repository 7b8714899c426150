/* src/shmem/stats.hpp — shared-memory counters behind pqrun.queue_stats.
 *
 * Per (database, queue, job_type): how many finished jobs are stored by
 * status, and what happened in the last five minutes (enqueued, picked up,
 * done, errors, run time, wait before pickup) in ten-second buckets. Changes
 * are collected per transaction and applied at COMMIT, so a rolled-back
 * transaction, or subtransaction, leaves no trace. A database's stored
 * counts are rebuilt from its tables on first read after a server start or
 * whenever they may have gone wrong (too many distinct pairs or changes in
 * subtransactions in one transaction, a prepared transaction); reads never
 * scan pqrun.job_done otherwise.
 */
#pragma once

#include "pg/pg.hpp"

#include "jobs/job_status.hpp"
#include "shmem/shmem.hpp"

namespace pqrun::stats {

enum class Finished { kDone, kFailed, kCancelled };

/* Event notes; names are the job's queue and job_type. */
void Enqueued(const char *queue, const char *job_type);
void PickedUp(const char *queue, const char *job_type, int64 wait_ms);
void Errored(const char *queue, const char *job_type);
void JobFinished(const char *queue, const char *job_type, Finished status, int64 duration_ms);
/* Stored finished jobs that went away (purge, retention) or came back (retry). */
void FinishedRemoved(const char *queue, const char *job_type, Finished status, int64 count);

/* FinishedOf maps DONE, FAILED and CANCELLED to their counters; false for
 * the other statuses. */
bool FinishedOf(JobStatus status, Finished *out);

/* Rescued notes RUNNING jobs put back by maintenance: stale ones and
 * orphaned ones (their holder's session ended). */
void Rescued(int64 stale, int64 orphaned);

/* Usage: the (database, queue, job_type) entries taken. */
shmem::TableUsage Usage();

void OnCommit();
void OnAbort();
/* OnPrepare: a prepared transaction's changes are applied by nobody; if it
 * made any, the stored counts are recounted at the next read (and again
 * after COMMIT PREPARED, InvalidateDatabase). */
void OnPrepare();
void InvalidateDatabase();
/* A subtransaction's notes count only if it commits. */
void OnSubCommit();
void OnSubAbort();

/* ResetDatabase marks this database's counters as exact zeros (a fresh
 * CREATE EXTENSION). */
void ResetDatabase();

/* KeepDatabases gives back the counters of databases not among the `n`
 * in `oids` (dropped ones); the launcher calls it after each scan. */
void KeepDatabases(const Oid *oids, int n);

/* Rows of pqrun._queue_counters() for this database, rebuilding first if
 * needed. SPI must be connected. */
void Report(Tuplestorestate *out, TupleDesc desc);

Size ShmemSize();
void ShmemInit();

} // namespace pqrun::stats
