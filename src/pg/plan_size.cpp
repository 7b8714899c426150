/* src/pg/plan_size.cpp — see plan_size.hpp. */
#include "pg/plan_size.hpp"

namespace pqrun::plan_size {

namespace {

/* What PostgreSQL assumes for a table never vacuumed (plancat.c). */
constexpr BlockNumber kMinPages = 10;

enum class Known { kNot, kAbsent, kPresent };
Known known = Known::kNot;
Oid live_id = InvalidOid;

/* LiveId answers pqrun.job_live's OID in this database, InvalidOid where
 * there is none; looked up once, until an invalidation. */
Oid
LiveId()
{
	if (known == Known::kNot) {
		Oid namespace_id = get_namespace_oid("pqrun", true);
		live_id = OidIsValid(namespace_id) ? get_relname_relid("job_live", namespace_id) : InvalidOid;
		known = OidIsValid(live_id) ? Known::kPresent : Known::kAbsent;
	}
	return live_id;
}

} // namespace

void
OnRelationInfo(Oid relid, RelOptInfo *rel)
{
	if (rel->pages < kMinPages && relid == LiveId())
		rel->pages = kMinPages;
}

void
OnRelcacheInvalidation(Oid relid)
{
	if (known == Known::kAbsent || relid == InvalidOid || relid == live_id)
		known = Known::kNot;
}

} // namespace pqrun::plan_size
