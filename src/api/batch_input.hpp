/* src/api/batch_input.hpp — reads pqrun.enqueue_batch's JSON array into
 * enqueue arguments, one element at a time. */
#pragma once

#include "jobs/queue.hpp"

namespace pqrun::batch {

struct JobCursor {
	JsonbIterator *it;
	int element;                 /* 1-based number of the element last read */
	jobs::EnqueueArgs defaults; /* made once: building '{}' per element costs */
};

/* Begin checks that `jobs` is a JSON array (22023 otherwise) and positions
 * the cursor before its first element. Elements share the default values,
 * which live in the current memory context. */
void Begin(Jsonb *jobs, JobCursor *cursor);

/* Next reads the next element into args (with enqueue's defaults for absent
 * or null keys) and answers false after the last one. Raises 22023 for an
 * element that is not an object, an unknown key or a value of the wrong
 * JSON type. */
bool Next(JobCursor *cursor, jobs::EnqueueArgs *args);

/* What the elements of a batch will lock, read before any of them is
 * enqueued (what is not a string is left to Next): the fifo_key of each
 * element that names one, the queue of each that names a concurrency_key
 * (enqueue's default queue where it names none), in element order, and
 * whether any element names depends_on. */
struct LockKeys {
	char **fifo_keys;
	int nfifo;
	char **keyed_queues;
	int nkeyed;
	bool has_dependencies;
};
LockKeys LockKeysOf(Jsonb *jobs);

} // namespace pqrun::batch
