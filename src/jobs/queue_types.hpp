/* src/jobs/queue_types.hpp — the job types of a queue, as a pickup last
 * found them.
 *
 * A pickup filtered by queue alone walks one filter lane per job type of
 * the queue (pick_direct.cpp), and finding them is a descent of
 * job_live_pick_queue per type and one more. Job types appear in a queue
 * only with jobs that become READY, which moves the hint generation
 * (pick_hint::Gen), so while nothing did (pick_hint::NothingReadyBelow) the
 * types found before still cover every job the pickup may claim: a type
 * whose jobs all ended since costs its lane one descent for nothing, as a
 * look would. Each backend keeps a few queues' types, each list small, in
 * memory bounded by constants; a queue with more is looked up each time.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::queue_types {

/* Known answers whether the job types of `queue` (text) are known: then
 * *types (palloc'd in the current context, text) and *ntypes hold them. */
bool Known(Datum queue, Datum **types, int *ntypes);

/* Remember keeps `types` as the job types of `queue`, found by a look
 * whose snapshot was taken after hint generation `gen` was read. */
void Remember(Datum queue, const Datum *types, int ntypes, uint64 gen);

} // namespace pqrun::queue_types
