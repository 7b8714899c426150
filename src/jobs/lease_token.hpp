/* src/jobs/lease_token.hpp — the lease tokens pickups hand out.
 *
 * A version-4 UUID from a generator each backend seeds once from the strong
 * random source. gen_random_uuid() asks OpenSSL for every token, which
 * costs a getpid() system call and locks each time (a tenth of a batch
 * pickup). A lease only fences off stale workers of the same job, so it
 * needs to be unique, not unpredictable: any worker may finish a job
 * without one.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::lease_token {

/* New writes a fresh token to `uuid`. */
void New(pg_uuid_t *uuid);

} // namespace pqrun::lease_token
