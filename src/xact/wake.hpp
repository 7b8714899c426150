/* src/xact/wake.hpp — telling the world that jobs became runnable.
 *
 * Writers note every job they make READY (NoteReady). At COMMIT the backend
 * sends NOTIFY pqrun_jobs once per queue and sets the latches of about as
 * many matching long-poll waiters as jobs became runnable; a rolled-back
 * transaction wakes and notifies no one. Waiters register in shared memory
 * (Waiter) with their filters. Without shared memory only NOTIFY works and
 * waiters poll.
 */
#pragma once

#include "jobs/pick_filter.hpp"
#include "pg/pg.hpp"
#include "shmem/wake_state.hpp"
#include "xact/pick_hint.hpp"

namespace pqrun::wake {

using pick_hint::PickKey;

/* NoteReady records that a job of (queue, job_type) with pickup key `key`
 * became READY in the current transaction (the pickup hint is lowered for
 * it at its commit). */
void NoteReady(const char *queue, const char *job_type, PickKey key);

/* NoteClaimed records a row of (queue, job_type) this transaction claimed
 * (READY again if the transaction, or the subtransaction it was claimed in,
 * rolls back, which then wakes a waiter for it). */
void NoteClaimed(PickKey key, const char *queue, const char *job_type);

/* ResetDatabase forgets the pickup hint and the next due time of this
 * database (CREATE EXTENSION: new tables, whose ids start again at 1; what
 * was known of the old ones, or of another database that had the slot,
 * does not hold), and has every copy of its controls read again. */
void ResetDatabase();

/* QueueGens sets gens[i] to a generation of queues[i] (0 without shared
 * state), all read under one lock: every commit that made one of the
 * queue's jobs READY or freed a place in one of its limits moves it, and so
 * does the rollback of a claim of one of its jobs; a change of the controls
 * moves ControlsGen instead. What a look found of a queue that only those
 * change holds while both stay (several queues share a generation). */
void QueueGens(const char *const *queues, int n, uint64 *gens);

/* NoteFreed records that a running job of (queue, job_type) ended in the
 * current transaction: a waiter held back by a concurrency limit
 * (flow_control.hpp) may take its place after the commit. */
void NoteFreed(const char *queue, const char *job_type);

/* NoteControlsChanged records that the current transaction changed the
 * controls of `queue` (`len` bytes; nullptr: of any queue) in
 * pqrun.queue_control; its commit moves ControlsGen() and, when `wakes`
 * (a change that may let a waiter claim: not a keyed mark), wakes every
 * waiter of the database. ControlsGen answers kNoControlsGen when the
 * database has no slot (or there is no shared state): nothing tells of
 * changes then, so the controls must be read again each time. */
constexpr uint64 kNoControlsGen = UINT64_MAX;
void NoteControlsChanged(const char *queue, int len, bool wakes);
uint64 ControlsGen();

/* The queues whose controls changed between two generations. */
struct ChangedQueues {
	static constexpr int kMax = DatabaseState::kChanged;
	int count; /* -1: not known, any queue's may have */
	int lens[kMax];
	char names[kMax][DatabaseState::kChangedName];
};

/* ControlsChangedSince answers ControlsGen() and fills `changed` with the
 * queues whose controls the commits after generation `since` changed, as
 * far as the database's ring of the last changes still tells (a name may
 * come more than once). */
uint64 ControlsChangedSince(uint64 since, ChangedQueues *changed);

/* A registered long-poll waiter, which takes up to `batch` jobs a look;
 * only one per backend. */
bool Register(const PickFilter &filter, int32 batch);
/* Unregister leaves the table; a waiter woken since its last PrepareCheck
 * that leaves without `claimed_any` passes the wake-up on. */
void Unregister(bool claimed_any);

/* A waiting heartbeat (requeue.cpp) registers the job it waits for, so
 * that the commit of a cancel that ends its lease (NoteLeaseEnded) wakes
 * it at once. */
void RegisterLeaseWait(int64 job_id);
void UnregisterLeaseWait();
void NoteLeaseEnded(int64 job_id);

/* PrepareCheck marks this waiter as not woken, before it looks for jobs;
 * LookDone follows a look that ran to its end, found a job or not. */
void PrepareCheck();
void LookDone();

/* WakeAll sets the latch of every waiter of this database. */
void WakeAll();

/* AfterPreparedEnded follows a COMMIT PREPARED or ROLLBACK PREPARED in this
 * database: waiters are woken and the queue counters recounted, since the
 * prepared transaction's own commit or abort told nobody. */
void AfterPreparedEnded();

/* The end of the transaction and of subtransactions (hooks.cpp calls them,
 * after stats' own): BeforeCommit sends the NOTIFYs; AtCommit lowers the
 * pickup hint (pick_hint.hpp) and wakes waiters for what became READY; AtAbort and
 * AtSubAbort wake them for claims that rolled back; AtSubCommit hands a
 * subtransaction's notes to its parent; AtPrepare keeps the hint below
 * what a prepared transaction touched. */
void BeforeCommit();
void AtCommit();
void AtAbort();
void AtPrepare();
void AtSubCommit();
void AtSubAbort();

/* ShmemSize / ShmemInit size and attach the waiter table (hooks.cpp). */
Size ShmemSize();
void ShmemInit();

} // namespace pqrun::wake
