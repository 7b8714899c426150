/* src/jobs/keyed_queues.hpp — which queues have lanes: a queue is marked
 * keyed while it holds jobs with a concurrency key, and forgotten after.
 *
 * A queue's keyed jobs are in its lanes (pick_lanes.hpp), which a pickup
 * walks for every queue marked keyed in pqrun.queue_control that it may
 * claim from. The enqueue (or retry) of a keyed job marks its queue
 * (flow_control::NoteKeyed); maintenance clears the mark once the queue
 * holds no job with a key, whatever its status, and the mark is a minute
 * old (ForgetIdle), so that queues a producer once gave keys do not cost
 * every unfiltered pickup a look for good, and a queue that empties now
 * and then is not marked and cleared at every round.
 *
 * The two meet under a lock per bucket of queue names, the
 * transaction-level advisory lock of class kLockClass (pg_locks shows it):
 * a keyed enqueue holds it in share mode until its transaction ends and
 * reads whether the queue is marked only once it holds it; maintenance
 * takes it exclusively, without waiting, looks for the queue's keyed jobs
 * under a snapshot taken after that, and clears the mark in a transaction
 * whose commit moves the controls generation (wake.hpp) before its lock is
 * released. So either maintenance sees the enqueue's job (which committed
 * first), or the enqueue sees the cleared mark and marks the queue again:
 * never neither. A batch into many queues takes at most kBuckets locks.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::keyed_queues {

constexpr uint32 kLockClass = 1886483051; /* 'pqrk' */
constexpr uint32 kBuckets = 64;

/* LockShared takes the lock of `queue`'s bucket (text) in share mode until
 * the end of the transaction: before a keyed enqueue reads whether the
 * queue is marked. */
void LockShared(Datum queue);

/* ForgetIdle clears the mark of keyed queues that hold no job with a key
 * and were marked over a minute ago, and drops their rows where nothing
 * else is left in them; answers how many it cleared. Each call looks at 256
 * queues, from where the last one stopped (its process's), so that a round
 * costs the same however many queues have controls. Passes over a queue whose lock or row is held (the next round
 * takes it), and does nothing under a transaction snapshot (REPEATABLE
 * READ: it must see what committed after its lock) and on Citus. SPI
 * must be connected. */
int64 ForgetIdle();

} // namespace pqrun::keyed_queues
