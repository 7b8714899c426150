/* src/pg/citus.cpp — what pqrun knows of Citus (citus.hpp). */
#include "pg/citus.hpp"

namespace pqrun::citus {

namespace {

enum class Known { kUnknown, kNo, kYes };
Known distributed = Known::kUnknown;

/* Column 1 of pg_dist_partition, logicalrelid (regclass). */
constexpr AttrNumber kLogicalRelid = 1;

constexpr const char *kJobTables[] = {"job_live", "job_done"};

} // namespace

bool
IsCitusTable(Oid relid)
{
	Oid catalog_id = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	if (!OidIsValid(catalog_id))
		return false;
	Relation catalog = table_open(catalog_id, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, kLogicalRelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	SysScanDesc scan = systable_beginscan(catalog, InvalidOid, false, nullptr, 1, &key);
	bool found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(catalog, AccessShareLock);
	return found;
}

bool
JobTablesDistributed()
{
	if (distributed == Known::kUnknown) {
		Oid namespace_id = get_namespace_oid("pqrun", true);
		bool yes = false;
		if (OidIsValid(namespace_id))
			for (const char *name : kJobTables) {
				Oid relid = get_relname_relid(name, namespace_id);
				yes = yes || (OidIsValid(relid) && IsCitusTable(relid));
			}
		distributed = yes ? Known::kYes : Known::kNo;
	}
	return distributed == Known::kYes;
}

void
RefuseDistributed()
{
	if (JobTablesDistributed())
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("pqrun does not run on tables distributed by Citus"),
		         errdetail("pqrun.job_live or pqrun.job_done of this database is a Citus table."),
		         errhint("pqrun runs on the tables of each node of a Citus cluster, not on Citus shards "
		                 "(README, \"Citus\").")));
}

void
OnRelcacheInvalidation(Oid)
{
	/* Any relation's: CREATE EXTENSION citus and every table it distributes
	 * send one. */
	distributed = Known::kUnknown;
}

} // namespace pqrun::citus
