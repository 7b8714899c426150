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

/* Whether this backend has read a version it serves, until a relcache
 * invalidation of pg_extension: then every call answers at once. Any other
 * answer is read again at the next call, so a session that got 55000 sees
 * the update at once even where the session that ran it had not loaded the
 * library (and so sent no invalidation). */
bool served_read = false;
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

/* Version answers the installed version, read again unless a served one
 * was read (an extension script moves it on before each step runs). */
const char *
Version()
{
	if (!served_read || creating_extension)
		ReadVersion(version);
	return version;
}

} // namespace

bool
Served()
{
	if (served_read && !creating_extension)
		return true;
	const char *v = Version();
	bool served = strcmp(v, PQRUN_VERSION) == 0 || strcmp(v, PQRUN_PREVIOUS_VERSION) == 0;
	served_read = served && !creating_extension;
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
	served_read = false;
	CacheInvalidateRelcacheByRelid(ExtensionRelationId);
}

void
OnRelcacheInvalidation(Oid relid)
{
	if (relid == InvalidOid || relid == ExtensionRelationId)
		served_read = false;
}

} // namespace pqrun::installed
