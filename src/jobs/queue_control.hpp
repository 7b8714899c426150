/* src/jobs/queue_control.hpp — setting the flow controls of queues: the rows
 * of pqrun.queue_control that pickups enforce (flow_control.hpp).
 *
 * A queue has at most one row for itself (job_type NULL: its pause, its
 * limit and its rate limit, its limit and rate limit for each of its
 * concurrency keys, whether it is keyed), one per job type and one per key
 * with a limit or a rate; a row that no longer controls anything is
 * deleted. Every change is announced at commit, so every
 * backend's next pickup reloads the controls and every waiter looks again.
 * SPI must be connected.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::queue_control {

/* Pause pauses `queue` (or resumes it, !paused), answering whether that
 * changed anything. */
bool Pause(text *queue, bool paused);

/* SetLimit sets the limit of `queue` (of `job_type` in it, when not
 * nullptr) to `max_running`, or removes it when max_running < 0. */
void SetLimit(text *queue, text *job_type, int32 max_running);

/* SetKeyLimit sets the limit of concurrency key `key` of `queue`, or when
 * key is nullptr the queue's limit for each of its keys without one of their
 * own; max_running < 0 removes it. */
void SetKeyLimit(text *queue, text *key, int32 max_running);

/* SetRate sets the rate limit of `queue` (of `job_type` in it, when not
 * nullptr) to `per_second` with `burst`, or removes it when per_second <= 0. */
void SetRate(text *queue, text *job_type, double per_second, int32 burst);

/* SetKeyRate sets the rate limit of concurrency key `key` of `queue`, or
 * when key is nullptr the queue's rate limit for each of its keys without
 * one of their own, to `per_second` with `burst`; per_second <= 0 removes
 * it. */
void SetKeyRate(text *queue, text *key, double per_second, int32 burst);

/* ForgetIdle drops the rows of `queue` that neither pause nor limit
 * anything and do not mark it keyed (after a control is removed, or its
 * keyed mark cleared: keyed_queues.cpp). */
void ForgetIdle(text *queue);

} // namespace pqrun::queue_control
