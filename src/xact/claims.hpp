/* src/xact/claims.hpp — the jobs a pickup locked and handed out, as the pickup
 * (pick.cpp), the deferral of their claims (deferred_claims.cpp) and the
 * writing of claims below the executor (claim_direct.cpp) pass them on. */
#pragma once

#include "pg/pg.hpp"

namespace pqrun {

/* Ids, lease tokens, whether each is in a FIFO group, the rows' ctids, and
 * whether the claiming session holds them (pqrun.claim_hold = session: they
 * end with it) or only their leases do. */
struct Claims {
	int count;
	int64 *ids;
	pg_uuid_t *tokens;
	bool *in_fifo;
	ItemPointerData *ctids;
	bool by_session;
};

} // namespace pqrun
