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

#include "pg/pg.hpp"
#include "shmem/wake_state.hpp"

namespace pqrun::wake {

/* Pickup keys: the order of pickup, (-priority, id), ascending. */
struct PickKey {
	int64 neg_priority;
	int64 id;
};
PickKey KeyOf(int32 priority, int64 id);
/* Less answers whether `a` is picked up before `b`. */
inline bool
Less(const PickKey &a, const PickKey &b)
{
	return a.neg_priority < b.neg_priority || (a.neg_priority == b.neg_priority && a.id < b.id);
}

/* NoteReady records that a job of (queue, job_type) with pickup key `key`
 * became READY in the current transaction. */
void NoteReady(const char *queue, const char *job_type, PickKey key);

/* NoteHeld records a READY row this transaction locked without claiming it
 * (pickups skip it meanwhile); NoteClaimed a row of (queue, job_type) it
 * claimed (READY again if the transaction, or the subtransaction it was
 * claimed in, rolls back, which then wakes a waiter for it). */
void NoteHeld(PickKey key);
void NoteClaimed(PickKey key, const char *queue, const char *job_type);

/* The pickup hint of this database: pickups start at *key, and no READY job
 * has a smaller key. ReadHint leaves *key alone while no hint is set, and
 * answers false when the database has no shared state at all. RaiseHint moves it up to `key` after an unfiltered pickup
 * that began with generation `gen`, unless a job became READY since. */
bool ReadHint(PickKey *key, uint64 *gen);
/* ResetDatabase forgets the hint and the next due time of this database
 * (CREATE EXTENSION: new tables, whose ids start again at 1; what was known
 * of the old ones, or of another database that had the slot, does not hold). */
void ResetDatabase();
void RaiseHint(uint64 gen, PickKey key);
void LowerHint(PickKey key);

/* For the lanes' own hints (pick_lanes.cpp), which start a lane's scan
 * past its dead head as the pickup hint does for the pick index: HintGen
 * answers the database's hint generation now (0 without shared state);
 * NothingReadyBelow answers whether no job became READY with a pickup key
 * below `key` since generation `gen`, this transaction's own included
 * (false when that is too long ago to tell). */
uint64 HintGen();
bool NothingReadyBelow(PickKey key, uint64 gen);

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

/* NoteDelayed records that a job becomes runnable at `run_after` with no
 * further event, so waiters can time their next look. */
void NoteDelayed(TimestampTz run_after);

/* A registered long-poll waiter; only one per backend. */
bool Register(ArrayType *job_types, ArrayType *queues);
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

/* NextDue answers when the earliest delayed job of this database falls due:
 * 0 when that is unknown (not computed since the server started), DT_NOEND
 * when there is none. It never exceeds the run_after of a committed delayed
 * job: commits that create one lower it, and it is only ever recomputed from
 * a snapshot taken after the value it replaces was read. So pickups may skip
 * promoting delayed jobs until then (only a manual UPDATE of run_after in
 * pqrun.job_live can outrun it, until the next maintenance round). */
TimestampTz NextDue();

/* ReplaceNextDue sets next_due to `due`, found by a query started after
 * NextDue() answered `seen`, unless a commit changed it meanwhile. */
void ReplaceNextDue(TimestampTz seen, TimestampTz due);

/* DelayedMayBeDue answers whether a delayed job may have fallen due. */
bool DelayedMayBeDue();

/* AfterPreparedEnded follows a COMMIT PREPARED or ROLLBACK PREPARED in this
 * database: waiters are woken and the queue counters recounted, since the
 * prepared transaction's own commit or abort told nobody. */
void AfterPreparedEnded();

/* The end of the transaction and of subtransactions (hooks.cpp calls them,
 * after stats' own): BeforeCommit sends the NOTIFYs; AtCommit lowers the
 * pickup hint and wakes waiters for what became READY; AtAbort and
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
