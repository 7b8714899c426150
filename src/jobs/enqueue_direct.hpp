/* src/jobs/enqueue_direct.hpp — plain jobs inserted below the executor.
 *
 * A job without dedupe key, dependencies or FIFO group is one new READY row
 * of job_live and nothing else. Through SQL that is an INSERT statement
 * whose executor start, projection and RETURNING cost more than the insert,
 * so such jobs are inserted with the table access method, as COPY does: the
 * columns pqrun does not set get their defaults (kept compiled per backend,
 * expr_cache.hpp), the row is checked against job_live's constraints and
 * given its index entries as the executor would. Nothing is written here,
 * and the SQL path inserts, where direct_rows::GoDirect declines (what
 * only the executor enforces: see there) or a default calls more than
 * built-in functions.
 */
#pragma once

#include "jobs/queue.hpp"

namespace pqrun::enqueue_direct {

/* Insert writes jobs[0..count) (validated; no dedupe key, depends_on or
 * fifo_key) into job_live in order, each READY, or delayed when its
 * run_after is later than now(), and stores their ids in `ids`. Answers
 * false, having written nothing, when the SQL path must. */
bool Insert(const jobs::EnqueueArgs *jobs, int count, int64 *ids);

} // namespace pqrun::enqueue_direct
