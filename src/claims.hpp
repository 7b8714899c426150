/* src/claims.hpp — the jobs a pickup locked and handed out, as the pickup
 * (pickup.cpp), the deferral of their claims (deferred_claims.cpp) and the
 * writing of claims below the executor (direct_claim.cpp) pass them on. */
#pragma once

#include "pg.hpp"

namespace pqrun {

/* Ids, lease tokens, whether each is in a FIFO group, and the rows' ctids. */
struct Claims {
	int count;
	int64 *ids;
	pg_uuid_t *tokens;
	bool *in_fifo;
	ItemPointerData *ctids;
};

} // namespace pqrun
