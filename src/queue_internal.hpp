/* src/queue_internal.hpp — what queue.cpp shares with enqueue.cpp and pickup.cpp.
 *
 * Not part of the queue's interface (queue.hpp); SPI must be connected.
 */
#pragma once

#include "pg.hpp"

namespace pqrun::queue {

/* Result layout of every statement that makes jobs READY: queue, job_type,
 * priority, id and, for some, delayed and run_after. */
enum class ReadyRows { kReady, kMaybeDelayed };

/* NoteRows reports each row of the last result as a job made READY (for
 * wake-ups, NOTIFY and the pickup hint), or as a delayed one. */
void NoteRows(uint64 n, ReadyRows layout);

/* LockFifoGroup takes the transaction-level advisory lock of a FIFO group;
 * see queue.cpp for the lock order. */
void LockFifoGroup(const char *fifo_key);

/* PromoteDue makes up to `limit` delayed jobs whose run_after has passed,
 * optionally only of the given types and queues, runnable. */
uint64 PromoteDue(ArrayType *job_types, ArrayType *queues, int32 limit);

/* LearnNextDue looks up when the earliest delayed job falls due, records it
 * as next_due unless a commit changed that from `seen` (read before this
 * call) meanwhile, and answers it (DT_NOEND for none). */
TimestampTz LearnNextDue(TimestampTz seen);

} // namespace pqrun::queue
