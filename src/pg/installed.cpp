/* src/pg/installed.cpp — the version of pqrun's SQL objects (installed.hpp). */
#include "pg/installed.hpp"

#include <algorithm>

#ifndef PQRUN_VERSION
#error "PQRUN_VERSION is set by the Makefile from pqrun.control"
#endif
#ifndef PQRUN_PREVIOUS_VERSION
#error "PQRUN_PREVIOUS_VERSION is set by the Makefile from the update script to PQRUN_VERSION"
#endif

namespace pqrun::installed {

namespace {

/* What this backend read: a served version, until a relcache invalidation
 * of pg_extension. Any other answer is read again at the next call, so a
 * session that got 55000 sees the update at once even where the session
 * that ran it had not loaded the library (and so sent no invalidation). */
bool known = false;
char version[NAMEDATALEN] = "";

/* ReadVersion copies pqrun's extversion in this database into `out`,
 * empty when it is not installed. */
void
ReadVersion(char (&out)[NAMEDATALEN])
{
	out[0] = '\0';
	Relation rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum("pqrun"));
	SysScanDesc scan = systable_beginscan(rel, ExtensionNameIndexId, true, nullptr, 1, &key);
	HeapTuple tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple)) {
		bool isnull;
		Datum datum = heap_getattr(tuple, Anum_pg_extension_extversion, RelationGetDescr(rel), &isnull);
		if (!isnull)
			text_to_cstring_buffer(DatumGetTextPP(datum), out, NAMEDATALEN);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

const char *
Version()
{
	/* An extension script moves the version on before each step runs. */
	if (creating_extension) {
		ReadVersion(version);
		known = false;
		return version;
	}
	if (!known) {
		ReadVersion(version);
		known = true;
	}
	return version;
}

} // namespace

bool
Served()
{
	const char *v = Version();
	bool served = strcmp(v, PQRUN_VERSION) == 0 || strcmp(v, PQRUN_PREVIOUS_VERSION) == 0;
	known = known && served;
	return served;
}

const char *
Describe()
{
	const char *v = Version();
	return psprintf("pqrun's SQL objects in database \"%s\" are at version %s; this library (%s) serves %s and %s",
	                get_database_name(MyDatabaseId), v[0] != '\0' ? v : "(none)", PQRUN_VERSION,
	                PQRUN_PREVIOUS_VERSION, PQRUN_VERSION);
}

const char *
Hint()
{
	/* A version this library does not know is newer, or the server still
	 * runs an older build than the one installed. */
	int a[3] = {0, 0, 0}, b[3] = {0, 0, 0};
	bool older = sscanf(Version(), "%d.%d.%d", &a[0], &a[1], &a[2]) == 3 &&
	             sscanf(PQRUN_PREVIOUS_VERSION, "%d.%d.%d", &b[0], &b[1], &b[2]) == 3 &&
	             std::lexicographical_compare(a, a + 3, b, b + 3);
	return older ? "Run ALTER EXTENSION pqrun UPDATE in this database."
	             : "Install the build of pqrun that matches its SQL objects and restart the server.";
}

void
RequireServed()
{
	if (!Served())
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("%s", Describe()),
		                errhint("%s", Hint())));
}

void
Changed()
{
	known = false;
	CacheInvalidateRelcacheByRelid(ExtensionRelationId);
}

void
OnRelcacheInvalidation(Oid relid)
{
	if (relid == InvalidOid || relid == ExtensionRelationId)
		known = false;
}

} // namespace pqrun::installed
