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

/* FifoKeys answers the fifo_key strings `jobs`' elements name, in element
 * order, their count in *n (what is not a string is left to Next), and
 * whether any element names depends_on. */
char **FifoKeys(Jsonb *jobs, int *n, bool *has_dependencies);

} // namespace pqrun::batch
