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
	if (JobTablesDistributed() && !InShards())
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("this pqrun call does not run on distributed tables"),
		         errdetail("pqrun's tables are distributed by Citus; a call works on the jobs of one queue, on the node "
		                   "that holds it, and only enqueue, pickup, the finishes, heartbeat, release, snooze, cancel, "
		                   "retry and the queue controls do (docs/citus.md)."),
		         errhint("Call it on the node that pqrun.queue_node(queue) names.")));
}

namespace {

/* Bumped by every relcache invalidation: Citus sends one for a distributed
 * table whenever a shard or placement of it changes (a trigger on
 * pg_dist_placement, on every node), so what was read of its shards with
 * the same generation still holds. */
uint64 generation = 1;

} // namespace

void
OnRelcacheInvalidation(Oid)
{
	/* Any relation's: CREATE EXTENSION citus and every table it distributes
	 * send one. */
	distributed = Known::kUnknown;
	generation++;
}

/* ---- The shards a transaction works on ---- */

namespace {

/* Where a shard group of pqrun.job_live and pqrun.job_done is. */
struct Located {
	int64 live;
	int64 done;
	int32 index;      /* of the shard in job_live's shard intervals */
	int32 colocation; /* job_live's colocation group */
	bool local;
	char node[NAMEDATALEN + 16];
	uint64 generation; /* when it was read */
};

/* The shards this transaction works on (live 0: none). */
struct Scope {
	int64 live;
	int64 done;
	char queue[NAMEDATALEN * 4]; /* the last queue entered ("" if none or longer) */
	int nest_level;              /* of the (sub)transaction that entered them */
	char live_name[NAMEDATALEN];
	char done_name[NAMEDATALEN];
};
Scope scope{};
char scoped[NAMEDATALEN];

/* The job_live shard of the last transaction that worked on shards: a
 * finish mostly comes from the session that picked the job up. */
int64 last_live = 0;

constexpr const char *kLocate =
    "SELECT l.shardid, d.shardid,"
    "       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_dist_shard x WHERE x.logicalrelid OPERATOR(pg_catalog.=) "
    "l.logicalrelid"
    "           AND x.shardminvalue::int OPERATOR(pg_catalog.<) l.shardminvalue::int)::int,"
    "       p.colocationid, pl.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group),"
    "       n.nodename OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) n.nodeport"
    "  FROM pg_catalog.pg_dist_shard l"
    "  JOIN pg_catalog.pg_dist_partition p ON p.logicalrelid OPERATOR(pg_catalog.=) l.logicalrelid"
    "  JOIN pg_catalog.pg_dist_shard d ON d.logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_done'::pg_catalog.regclass"
    "   AND d.shardminvalue OPERATOR(pg_catalog.=) l.shardminvalue"
    "  JOIN pg_catalog.pg_dist_placement pl ON pl.shardid OPERATOR(pg_catalog.=) l.shardid"
    "  JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) pl.groupid"
    " WHERE l.shardid OPERATOR(pg_catalog.=) ";

/* Locate reads where the shard group is whose job_live shard `where` (SQL
 * giving a shard id from $1) names. */
bool
Locate(const char *where, Oid argtype, Datum arg, Located *out)
{
	uint64 read_at = generation;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
	char *sql = psprintf("%s%s", kLocate, where);
	/* A snapshot of now, not the statement's: taken after the metadata
	 * lock, it sees the placement a move committed before releasing it. */
	PushActiveSnapshot(GetLatestSnapshot());
	int rc = SPI_execute_with_args(sql, 1, &argtype, &arg, nullptr, true, 1);
	PopActiveSnapshot();
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "pqrun: locating a shard failed: %s", SPI_result_code_string(rc));
	bool found = SPI_processed == 1;
	if (found) {
		HeapTuple row = SPI_tuptable->vals[0];
		TupleDesc desc = SPI_tuptable->tupdesc;
		bool isnull;
		out->live = DatumGetInt64(SPI_getbinval(row, desc, 1, &isnull));
		out->done = DatumGetInt64(SPI_getbinval(row, desc, 2, &isnull));
		out->index = DatumGetInt32(SPI_getbinval(row, desc, 3, &isnull));
		out->colocation = DatumGetInt32(SPI_getbinval(row, desc, 4, &isnull));
		out->local = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
		strlcpy(out->node, SPI_getvalue(row, desc, 6), sizeof(out->node));
		out->generation = read_at;
	}
	SPI_finish();
	return found;
}

/* What this backend read of queues ("q" and the name) and shards ("s" and
 * the id), reused while no invalidation came (a few catalog joins saved on
 * each call). */
constexpr int kKeyBytes = 128;
struct Cached {
	char key[kKeyBytes]; /* hash key */
	Located at;
};
HTAB *cache = nullptr;

bool
LocateCached(const char *key, const char *where, Oid argtype, Datum arg, Located *out)
{
	if (strlen(key) >= kKeyBytes)
		return Locate(where, argtype, arg, out);
	if (cache == nullptr) {
		HASHCTL ctl{};
		ctl.keysize = kKeyBytes;
		ctl.entrysize = sizeof(Cached);
		ctl.hcxt = TopMemoryContext;
		cache = hash_create("pqrun Citus shards", 64, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	char padded[kKeyBytes] = {};
	strlcpy(padded, key, sizeof(padded));
	auto *entry = static_cast<Cached *>(hash_search(cache, padded, HASH_FIND, nullptr));
	if (entry != nullptr && entry->at.generation == generation) {
		*out = entry->at;
		return true;
	}
	if (!Locate(where, argtype, arg, out))
		return false;
	if (hash_get_num_entries(cache) >= 1024 && entry == nullptr)
		return true; /* a backend going through very many queues */
	entry = static_cast<Cached *>(hash_search(cache, padded, HASH_ENTER, nullptr));
	entry->at = *out;
	return true;
}

bool
LocateShard(int64 live, Located *out)
{
	char key[32];
	snprintf(key, sizeof(key), "s%ld", static_cast<long>(live));
	return LocateCached(key, "$1", INT8OID, Int64GetDatum(live), out);
}

[[noreturn]] void
RefuseOtherShards()
{
	ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
	                errmsg("on Citus, a transaction works on the jobs of one shard of pqrun's tables"),
	                errdetail("This transaction works on the shard %ld of pqrun.job_live already.",
	                          static_cast<long>(scope.live))));
}

/* Enter scopes the transaction to the shards at `at`, on this node. */
void
Enter(const Located &at, const char *what)
{
	if (scope.live == at.live)
		return;
	if (scope.live != 0)
		RefuseOtherShards();
	/* Citus's own writes take the shard group's metadata lock in SHARE
	 * mode; a move takes it in EXCLUSIVE mode before it switches the
	 * placement; the old shard stays until Citus drops it later, and writes
	 * there would be lost (a job handed out again from the copy). Once the
	 * lock is held, a placement read (with a snapshot of its time) is still
	 * right unless an invalidation came since: a move sends its own before
	 * it releases the lock. */
	LOCKTAG tag;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(at.index), static_cast<uint32>(at.colocation), 8);
	(void)LockAcquire(&tag, ShareLock, false, false);
	AcceptInvalidationMessages();
	Located now = at;
	if ((at.generation != generation || !at.local) && !Locate("$1", INT8OID, Int64GetDatum(at.live), &now))
		now.node[0] = '\0';
	if (now.node[0] == '\0' || !now.local)
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("the jobs of %s are on another node of the Citus cluster", what),
		                errdetail("Their shard of pqrun.job_live is %ld, on %s.", static_cast<long>(at.live),
		                          now.node[0] != '\0' ? now.node : "no node"),
		                errhint("Call it on that node.")));
	scope.live = at.live;
	scope.done = at.done;
	scope.nest_level = GetCurrentTransactionNestLevel();
	snprintf(scope.live_name, sizeof(scope.live_name), "job_live_%ld", static_cast<long>(at.live));
	snprintf(scope.done_name, sizeof(scope.done_name), "job_done_%ld", static_cast<long>(at.done));
	last_live = at.live;
}

/* This node's shard groups (job_live's and job_done's shard ids), kept
 * while no invalidation came. */
struct LocalGroups {
	int64 *live;
	int64 *done;
	int count;
	uint64 generation;
};
LocalGroups local{};

const LocalGroups &
ListLocal()
{
	if (local.live != nullptr && local.generation == generation)
		return local;
	uint64 read_at = generation;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
	PushActiveSnapshot(GetLatestSnapshot()); /* as Locate's */
	int rc = SPI_execute("SELECT l.shardid, d.shardid FROM pg_catalog.pg_dist_shard l"
	                     "  JOIN pg_catalog.pg_dist_shard d ON d.logicalrelid OPERATOR(pg_catalog.=) "
	                     "'pqrun.job_done'::pg_catalog.regclass"
	                     "   AND d.shardminvalue OPERATOR(pg_catalog.=) l.shardminvalue"
	                     "  JOIN pg_catalog.pg_dist_placement pl ON pl.shardid OPERATOR(pg_catalog.=) l.shardid"
	                     " WHERE l.logicalrelid OPERATOR(pg_catalog.=) 'pqrun.job_live'::pg_catalog.regclass"
	                     "   AND pl.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM "
	                     "pg_catalog.pg_dist_local_group)"
	                     " ORDER BY 1",
	                     true, 0);
	PopActiveSnapshot();
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "pqrun: listing this node's shards failed: %s", SPI_result_code_string(rc));
	int count = static_cast<int>(SPI_processed);
	auto *live = static_cast<int64 *>(MemoryContextAlloc(TopMemoryContext, sizeof(int64) * Max(count, 1)));
	auto *done = static_cast<int64 *>(MemoryContextAlloc(TopMemoryContext, sizeof(int64) * Max(count, 1)));
	for (int i = 0; i < count; i++) {
		bool isnull;
		live[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		done[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
	SPI_finish();
	if (local.live != nullptr) {
		pfree(local.live);
		pfree(local.done);
	}
	local = LocalGroups{live, done, count, read_at};
	return local;
}

/* Holds answers whether the shard group (live, done) holds job `job_id`;
 * its statement is prepared once per shard group. */
struct Probe {
	int64 live; /* hash key */
	SPIPlanPtr plan;
};
HTAB *probes = nullptr;

bool
Holds(int64 live, int64 done, int64 job_id)
{
	if (probes == nullptr) {
		HASHCTL ctl{};
		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(Probe);
		ctl.hcxt = TopMemoryContext;
		probes = hash_create("pqrun Citus probes", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	bool found;
	auto *probe = static_cast<Probe *>(hash_search(probes, &live, HASH_ENTER, &found));
	if (!found)
		probe->plan = nullptr;
	Oid argtype = INT8OID;
	if (probe->plan == nullptr) {
		char *sql = psprintf("SELECT FROM pqrun.job_live_%ld WHERE id OPERATOR(pg_catalog.=) $1"
		                     " UNION ALL SELECT FROM pqrun.job_done_%ld WHERE id OPERATOR(pg_catalog.=) $1 LIMIT 1",
		                     static_cast<long>(live), static_cast<long>(done));
		SPIPlanPtr plan = SPI_prepare(sql, 1, &argtype);
		if (plan == nullptr || SPI_keepplan(plan) != 0)
			elog(ERROR, "pqrun: could not prepare the probe of shard %ld: %s", static_cast<long>(live),
			     SPI_result_code_string(SPI_result));
		probe->plan = plan;
	}
	Datum arg = Int64GetDatum(job_id);
	return SPI_execute_plan(probe->plan, &arg, nullptr, true, 1) == SPI_OK_SELECT && SPI_processed > 0;
}

} // namespace

bool
InShards()
{
	return scope.live != 0;
}

Oid
JobLiveShell()
{
	return get_relname_relid("job_live", get_namespace_oid("pqrun", false));
}

int64
ShardOf()
{
	return scope.live;
}

const char *
Scoped(const char *name)
{
	if (scope.live == 0)
		return name;
	if (strcmp(name, "job_live") == 0)
		return scope.live_name;
	if (strcmp(name, "job_done") == 0)
		return scope.done_name;
	/* job_live's indexes: Citus names a shard's after the shard. */
	snprintf(scoped, sizeof(scoped), "%s_%ld", name, static_cast<long>(scope.live));
	return scoped;
}

void
EnterQueue(const char *queue)
{
	if (!JobTablesDistributed())
		return;
	if (scope.live != 0 && strcmp(scope.queue, queue) == 0)
		return;
	Located at;
	if (!LocateCached(psprintf("q%s", queue), "pg_catalog.get_shard_id_for_distribution_column('pqrun.job_live', $1)",
	                  TEXTOID, CStringGetTextDatum(queue), &at))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("pqrun's tables are not distributed as pqrun.distribute() does"),
		                errdetail("No shard of pqrun.job_live with its shard of pqrun.job_done holds queue %s.", queue)));
	Enter(at, psprintf("queue %s", queue));
	if (strlen(queue) < sizeof(scope.queue))
		strlcpy(scope.queue, queue, sizeof(scope.queue));
}

void
EnterJob(int64 job_id)
{
	if (!JobTablesDistributed() || scope.live != 0)
		return;
	const LocalGroups &groups = ListLocal();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
	/* The last transaction's shard first. */
	int64 found = 0;
	for (int i = 0; i < groups.count && found == 0; i++)
		if (groups.live[i] == last_live && Holds(groups.live[i], groups.done[i], job_id))
			found = groups.live[i];
	for (int i = 0; i < groups.count && found == 0; i++)
		if (groups.live[i] != last_live && Holds(groups.live[i], groups.done[i], job_id))
			found = groups.live[i];
	SPI_finish();
	Located at;
	if (found == 0 || !LocateShard(found, &at))
		ereport(ERROR, (errcode(ERRCODE_NO_DATA_FOUND),
		                errmsg("job %lld does not exist on this node", static_cast<long long>(job_id)),
		                errhint("On Citus, a job is finished on the node that holds its queue.")));
	Enter(at, psprintf("job %lld", static_cast<long long>(job_id)));
}

int64 *
LocalShards(int *n)
{
	*n = 0;
	if (!JobTablesDistributed())
		return nullptr;
	const LocalGroups &groups = ListLocal();
	auto *shards = static_cast<int64 *>(palloc(sizeof(int64) * Max(groups.count, 1)));
	memcpy(shards, groups.live, sizeof(int64) * groups.count);
	*n = groups.count;
	return shards;
}

void
EnterShard(int64 live)
{
	Located at;
	if (!LocateShard(live, &at))
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
		                errmsg("pqrun.job_live has no shard %ld any more", static_cast<long>(live))));
	Enter(at, psprintf("shard %ld", static_cast<long>(live)));
}

void
AtTransactionEnd()
{
	scope = Scope{};
}

void
AtSubCommit()
{
	/* Its lock now belongs to the parent. */
	if (scope.live != 0 && scope.nest_level == GetCurrentTransactionNestLevel())
		scope.nest_level--;
}

void
AtSubAbort()
{
	/* Its lock went with the subtransaction that took it. */
	if (scope.live != 0 && GetCurrentTransactionNestLevel() <= scope.nest_level)
		scope = Scope{};
}

} // namespace pqrun::citus
