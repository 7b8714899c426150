/* src/pg/plan_size.cpp — see plan_size.hpp. */
#include "pg/plan_size.hpp"

namespace pqrun::plan_size {

namespace {

/* What PostgreSQL assumes for a table never vacuumed (plancat.c). */
constexpr BlockNumber kMinPages = 10;

} // namespace

void
OnRelationInfo(Oid relid, bool inhparent, RelOptInfo *rel)
{
	/* Two syscache lookups, for the small tables only. */
	if (inhparent || rel->pages >= kMinPages)
		return;
	Oid namespace_id = get_rel_namespace(relid);
	if (namespace_id != PG_CATALOG_NAMESPACE && namespace_id == get_namespace_oid("pqrun", true))
		rel->pages = kMinPages;
}

} // namespace pqrun::plan_size
