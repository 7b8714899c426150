/* src/jobs/flow_control.hpp — pausing queues, limiting how many of their
 * jobs run at once and how fast they are claimed, enforced when a pickup
 * claims.
 *
 * pqrun.queue_control holds the controls: per queue (job_type NULL) a
 * pause, a limit, a rate limit and a limit for each of its concurrency
 * keys, per (queue, job_type) and per (queue, concurrency_key) a limit and a
 * rate limit; a queue's row may also hold a rate limit for each of its
 * keys, each key then having a bucket of its own. A queue that holds jobs
 * with keys is marked keyed (keyed_queues.hpp): its keyed jobs are not in
 * the pick index but in lanes (pick_lanes.hpp), which pickups of the queue
 * walk. A rate limit is
 * a token bucket in shared memory (rate per second, at most `burst` tokens,
 * full when first used): a claim needs one token and takes the job's rate
 * weight (1 unless enqueued with another), so a heavy job may leave the
 * bucket below zero and the next claim waits until it has a token again;
 * a claim that rolls back gives its tokens back. The buckets of keys are
 * kept in a server-wide table of kMaxKeyBuckets: a full bucket is the same
 * as none, so only keys claimed from within a burst's refill hold one, and
 * when more than that are below full, the fullest is forgotten (its key
 * starts again from a full bucket). Each backend keeps a
 * copy, reloaded when a commit that changed the table moves the database's
 * controls generation (wake.hpp). A limit counts the places taken in it in
 * shared memory: one entry per claimed job (id, attempt, claiming
 * transaction), so a claim is checked and counted under one lock and two
 * concurrent pickups can never both take the last place. A session that
 * knows the limits and ends a run gives its places back when that commits
 * (NoteEnded); any other entry stays until a look under a fresh snapshot
 * shows its job no longer RUNNING under that lease (Verify, when a full
 * limit is looked at, at most every 20 ms, 256 places at a time in turn):
 * done, failed, cancelled, reaped,
 * rescued, given back by a session that never picked up, or its claim
 * rolled back. A limit's entries are loaded from the RUNNING rows the first
 * time a pickup needs it after a server start or after the limit was
 * created, so the count is right whatever ended the runs meanwhile. A
 * pickup that began before a new or lowered limit committed may still
 * claim by the old one.
 *
 * Without shared memory (pqrun not preloaded) nothing is enforced and the
 * SQL functions that set controls refuse (55000).
 */
#pragma once

#include "pg/pg.hpp"
#include "jobs/pick_filter.hpp"
#include "shmem/shmem.hpp"

namespace pqrun::flow_control {

/* The most a limit may be, and a rate (per second) and a burst (22023
 * above). */
constexpr int32 kMaxLimit = 10000;
constexpr double kMaxRate = 1000000;
constexpr int32 kMaxBurst = 1000000;
/* The most tokens a job may take (enqueue's rate_weight). */
constexpr int32 kMaxRateWeight = 1000000;

/* PrepareLook readies this backend's controls for a look of a pickup (or
 * await_jobs) filtered by job_types and queues (nullptr: any) that may
 * claim `want` jobs: reloads them if they changed, loads the counts of the
 * limits the look may claim from, and refreshes those without room for
 * `want`. Answers whether any control of the database applies to it; when
 * not, Blocked and Reserve need not be called. SPI must be connected. */
bool PrepareLook(const PickFilter &filter, int32 want);

/* Blocked answers whether a job of (queue, job_type) may not be claimed now:
 * its queue is paused or one of its limits is full. A hint for skipping a
 * row before locking it; Reserve decides. */
bool Blocked(Datum queue, Datum job_type);

/* Reserve takes a place for the claim of job `job_id` with lease `token`
 * in every limit of (queue, job_type, key) (key Datum(0): none), and
 * `weight` tokens of every rate limit (each needs one), under one lock:
 * false, taking none, when its queue is paused, a limit is full or a bucket
 * has no token. A place taken in a queue's limit records the job's key, so
 * that the same places count the queue's limit per key. Places and tokens
 * taken by a transaction that rolls back are given back at once. */
bool Reserve(Datum queue, Datum job_type, Datum key, int32 weight, int64 job_id, const pg_uuid_t *token);

/* KeyBlocked answers, after PrepareLook, whether no job of concurrency key
 * `key` of `queue` may be claimed now: the queue is paused or full, the
 * key's own limit or rate limit is, or (without one of its own) the
 * queue's limit or rate limit per key is. A lane pick asks it before
 * locking a key's job; Reserve decides. *by_limit (when given) tells
 * whether only a concurrency limit blocks it: it stays blocked until a
 * place of the queue is freed or the controls change (wake::QueueGen,
 * wake::ControlsGen). */
bool KeyBlocked(Datum queue, Datum key, bool *by_limit = nullptr);

/* QueueBlocked answers, after PrepareLook, whether no job of `queue` may be
 * claimed now whatever its key or job type: it is paused, or its own limit
 * or rate limit is full. A lane pick asks it before walking the queue's
 * keys, so that a paused or full queue costs nothing however many keys it
 * has. */
bool QueueBlocked(Datum queue);

/* PausesOnly answers whether the controls the last PrepareLook found to apply
 * are pauses only, which the pick's filter of blocked queues enforces
 * whole: no claim needs a place or a token, and the pick may claim in one
 * statement. */
bool PausesOnly();

/* LaneQueues sets *names to the keyed queues the last PrepareLook's look may
 * claim from, answering how many (valid until the next PrepareLook). Known
 * without shared memory too: keyed jobs are picked from their lanes
 * whether or not anything is enforced. */
int LaneQueues(const char *const **names);

/* NoteKeyed marks `queue` keyed in pqrun.queue_control, unless it is,
 * when a job with a concurrency key is written to it, and keeps maintenance
 * from clearing the mark until the transaction ends (keyed_queues.hpp; SPI
 * connected; the caller runs as the extension's owner). */
void NoteKeyed(Datum queue);

/* For the SQL picks (after PrepareLook): the queues no job may be claimed from,
 * the (queue, job_type) pairs no job may be claimed from as PairKey
 * encodes them, and every queue with a control. Empty arrays when none. */
Datum BlockedQueues();
Datum BlockedPairs();
Datum ControlledQueues();

/* Skipped answers whether, since the last PrepareLook, Blocked or Reserve
 * held a job back or BlockedQueues/BlockedPairs named one: the pickup then
 * passed over READY jobs and must not raise the pickup hint past them. */
bool Skipped();
/* HeldBack answers whether the look passed over a row by Blocked or Reserve
 * (a full limit, an empty bucket), not only by the pick's filter of blocked
 * queues and pairs, which BlockedQueues and BlockedPairs make. */
bool HeldBack();

/* LimitedLook answers whether the last PrepareLook found a limit the look may
 * claim from full: a waiter then looks again now and then, in case a place
 * was freed by a path that does not wake it. */
bool LimitedLook();
/* NoteLimitedLook records that the look passed over a full limit without
 * asking (pick_lanes.cpp, a queue whose keys it knows all blocked). */
void NoteLimitedLook();
int LimitedPollMs();

/* NextTokenAt answers when the rate limit the last PrepareLook found empty
 * has a token again (the earliest, if several), 0 if none was: a waiter
 * sleeps until then. */
TimestampTz NextTokenAt();

/* NoteEnded records that the run of job `job_id` of (queue, job_type)
 * ended in this transaction: at its commit, the places of its claim are
 * given back and waiters of a limited pair are woken. */
void NoteEnded(const char *queue, const char *job_type, int64 job_id);

/* NoteChanged records that this transaction changed pqrun.queue_control
 * through pqrun's own statements: queue by queue when the table's trigger
 * (0.19.0) told which, else as a change of every queue's controls. */
void NoteChanged();

/* NoteQueueChanged records that this transaction changed the controls of
 * `queue` (`len` bytes; nullptr: of every queue), and whether that may let
 * a waiter claim (`wakes`: not for a keyed mark alone); NoteTriggerFired
 * that the table's trigger runs in this transaction (api/sql_control.cpp,
 * which calls both for every statement that writes pqrun.queue_control). */
void NoteQueueChanged(const char *queue, int len, bool wakes);
void NoteTriggerFired();

/* The end of a transaction and of a subtransaction (hooks.cpp): places a
 * rolled-back claim took are given back; a committed subtransaction's
 * claims pass to its parent. A prepared transaction keeps the places of
 * its claims and of the runs it ended: they are given back once a look
 * finds its end committed (a full limit is looked at again every few
 * milliseconds), not before. */
void AtCommit();
void AtPrepare();
void AtAbort();
void AtSubAbort();
void AtSubCommit();

/* Report appends, for each counted control of this database, (control id,
 * places taken, tokens in its bucket, when it was last refilled) to `out`. */
void Report(Tuplestorestate *out, TupleDesc desc);

/* ReportKeyBuckets appends, for each rate limit per key of this database
 * whose keys hold buckets, (control id, keys whose buckets are below full,
 * keys without a token now) to `out`. */
void ReportKeyBuckets(Tuplestorestate *out, TupleDesc desc);

/* ResetDatabase forgets every count of this database (CREATE EXTENSION:
 * new tables, whose control and job ids start again at 1). */
void ResetDatabase();

/* KeepDatabases gives back the counters, places and key buckets of every
 * database but those of `oids` (the launcher's scan of pg_database: a
 * dropped database's limits are no longer counted). A database created
 * after `oids` were read may lose counters it made meanwhile: they are
 * loaded again from its RUNNING jobs when next needed. */
void KeepDatabases(const Oid *oids, int n);

/* Usage: how full the tables of limits' counters, their places (one per
 * job RUNNING under a limit) and the key buckets are, three of them. */
int Usage(shmem::TableUsage out[3]);

Size ShmemSize();
void ShmemInit();

} // namespace pqrun::flow_control
