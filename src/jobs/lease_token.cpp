/* src/jobs/lease_token.cpp — the lease tokens pickups hand out. */
#include "jobs/lease_token.hpp"

namespace pqrun::lease_token {

void
New(pg_uuid_t *uuid)
{
	static pg_prng_state state;
	static bool seeded = false;
	if (!seeded) {
		if (!pg_prng_strong_seed(&state))
			elog(ERROR, "pqrun: could not seed the lease token generator");
		seeded = true;
	}
	uint64 halves[2] = {pg_prng_uint64(&state), pg_prng_uint64(&state)};
	memcpy(uuid->data, halves, UUID_LEN);
	uuid->data[6] = (uuid->data[6] & 0x0f) | 0x40; /* version 4 */
	uuid->data[8] = (uuid->data[8] & 0x3f) | 0x80; /* RFC 4122 variant */
}

} // namespace pqrun::lease_token
