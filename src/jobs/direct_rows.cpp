/* src/jobs/direct_rows.cpp — what writing pqrun's rows below the executor needs. */
#include "jobs/direct_rows.hpp"

#include "jobs/expr_cache.hpp"
#include "jobs/job_row.hpp"
#include "pg/citus.hpp"

namespace pqrun::direct_rows {

namespace {

bool preparing = false;

/* The verdict on the tables themselves (BareHeap, HasColumnsOf) for the last
 * pair asked about, and on the last partition of job_done a finish wrote,
 * kept until a relcache invalidation of any of them: every change it
 * depends on (a column, its type, a trigger, a rule, row security, a
 * publication, a partition attached or detached) invalidates the table's
 * relcache entry. */
struct Verdict {
	Oid live;
	Oid done;
	bool allowed;
	Layout live_layout; /* live's; for leaf_verdict, unused */
	Layout done_layout; /* done's: for leaf_verdict, the partition's */
};
Verdict verdict{InvalidOid, InvalidOid, false, {}, {}};
Verdict leaf_verdict{InvalidOid, InvalidOid, false, {}, {}}; /* done: the partition */
uint64 invalidations = 0; /* a verdict reached across one is not kept */

/* JobStatusType answers the oid of type job_status in `namespace_id`. */
Oid
JobStatusType(Oid namespace_id)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("job_status"), ObjectIdGetDatum(namespace_id));
}

/* HasColumnsOf answers whether `rel` has exactly the columns of `table`
 * in job_row.hpp, each of its type with no type modifier, and finds them
 * in `layout`. */
bool
HasColumnsOf(Relation rel, job_row::Table table, Oid job_status, Layout *layout)
{
	TupleDesc desc = RelationGetDescr(rel);
	*layout = Layout{};
	int required = 0, found = 0;
	for (int i = 0; i < job_row::kCount; i++)
		required += job_row::In(i, table) ? 1 : 0;
	for (int a = 0; a < desc->natts; a++) {
		Form_pg_attribute att = TupleDescAttr(desc, a);
		if (att->attisdropped)
			continue;
		int i = job_row::Find(NameStr(att->attname));
		if (i < 0 || !job_row::In(i, table))
			return false;
		Oid type = OidIsValid(job_row::kColumns[i].type) ? job_row::kColumns[i].type : job_status;
		if (att->atttypid != type || att->atttypmod != -1 || att->attgenerated != '\0')
			return false;
		found++;
		layout->at[i] = att->attnum;
	}
	if (found != required)
		return false;
	layout->status_type = job_status;
	layout->ready = EnumLabel(job_status, JobStatus::kReady);
	layout->running = EnumLabel(job_status, JobStatus::kRunning);
	layout->done = EnumLabel(job_status, JobStatus::kDone);
	return true;
}

/* PartitionedByFinish answers whether `rel` is partitioned by range of its
 * finished_at column alone, in timestamptz's own order: the partitioning
 * FinishPartition knows how to follow (job_done since 0.12.0). */
bool
PartitionedByFinish(Relation rel)
{
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		return false;
	AttrNumber finished_at = InvalidAttrNumber;
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (!att->attisdropped && strcmp(NameStr(att->attname), "finished_at") == 0)
			finished_at = att->attnum;
	}
	PartitionKey key = RelationGetPartitionKey(rel);
	return key->strategy == PARTITION_STRATEGY_RANGE && key->partnatts == 1 && finished_at != InvalidAttrNumber &&
	       key->partattrs[0] == finished_at && key->parttypid[0] == TIMESTAMPTZOID &&
	       key->partsupfunc[0].fn_oid == F_TIMESTAMPTZ_CMP;
}

/* BareHeap answers whether `rel` is a heap table with nothing only the
 * executor honours: triggers (also foreign keys), rules, row security,
 * generated columns, publications, Citus (a Citus table is a shell whose
 * rows live in shards, pg/citus.hpp). `kind` says where it may stand in a
 * partitioning: job_live in none; job_done may be partitioned by finish
 * time (0.12.0) and then each of its partitions, a heap table, is asked
 * about as well. The relcache's trigger and rule sets, not relhastriggers
 * and relhasrules, which stay set after the last one is dropped. */
enum class Kind { kAlone, kDone, kDonePartition };

bool
BareHeap(Relation rel, Kind kind)
{
	bool shape = kind == Kind::kDone && PartitionedByFinish(rel)
	                 ? true
	                 : rel->rd_rel->relkind == RELKIND_RELATION && rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
	                       rel->rd_rel->relispartition == (kind == Kind::kDonePartition);
	if (!shape || rel->trigdesc != nullptr || (rel->rd_rules != nullptr && rel->rd_rules->numLocks > 0) ||
	    rel->rd_rel->relrowsecurity || rel->rd_rel->relforcerowsecurity ||
	    (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored) ||
	    citus::IsCitusTable(RelationGetRelid(rel)))
		return false;
	PublicationDesc publications;
	RelationBuildPublicationDesc(rel, &publications);
	return !publications.pubactions.pubinsert && !publications.pubactions.pubupdate &&
	       !publications.pubactions.pubdelete && !publications.pubactions.pubtruncate;
}

/* FinishPartition answers the partition of `done` (PartitionedByFinish)
 * that a row finished now, at the transaction's start as every finish
 * writes it, goes to: the executor's routing (get_partition_for_tuple) for
 * one range key. InvalidOid, for the SQL path, when that is the default
 * partition (the executor checks its constraint again there: a partition
 * attached concurrently, which our lock on `done` does not hold off, may
 * have taken the row's time), when there is none (the executor's error)
 * and when a partition is being detached concurrently. A partition by
 * range cannot change under our lock: detaching or dropping it needs an
 * exclusive lock on `done`, and no partition attached meanwhile can
 * overlap it. */
Oid
FinishPartition(Relation done)
{
	PartitionKey key = RelationGetPartitionKey(done);
	PartitionDesc desc = RelationGetPartitionDesc(done, true);
	PartitionBoundInfo bounds = desc->boundinfo;
	if (bounds == nullptr || desc->detached_exist || bounds->ndatums == 0)
		return InvalidOid;
	Datum now = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	bool equal;
	int offset = partition_range_datum_bsearch(key->partsupfunc, key->partcollation, bounds, 1, &now, &equal);
	int index = bounds->indexes[offset + 1];
	return index >= 0 ? desc->oids[index] : InvalidOid;
}

/* OpenFinishPartition replaces job_done in `tables` by the partition a
 * finish now writes to, open with `lockmode`, when BareHeap and
 * HasColumnsOf allow it; answers false otherwise. */
bool
OpenFinishPartition(Tables *tables, LOCKMODE lockmode, Oid namespace_id)
{
	Oid done_id = RelationGetRelid(tables->done);
	Oid leaf_id = FinishPartition(tables->done);
	if (!OidIsValid(leaf_id))
		return false;
	Relation leaf = table_open(leaf_id, lockmode);
	tables->root = tables->done;
	tables->done = leaf;
	if (leaf_verdict.live != done_id || leaf_verdict.done != leaf_id) {
		uint64 seen = invalidations;
		Verdict v{done_id, leaf_id, false, {}, {}};
		v.allowed = BareHeap(leaf, Kind::kDonePartition) &&
		            HasColumnsOf(leaf, job_row::kDone, JobStatusType(namespace_id), &v.done_layout);
		if (seen != invalidations) {
			tables->done_layout = v.done_layout;
			return v.allowed;
		}
		leaf_verdict = v;
	}
	tables->done_layout = leaf_verdict.done_layout;
	return leaf_verdict.allowed;
}

} // namespace

void
OnRelcacheInvalidation(Oid relid)
{
	invalidations++;
	if (relid == InvalidOid || relid == verdict.live || relid == verdict.done)
		verdict = Verdict{InvalidOid, InvalidOid, false, {}, {}};
	if (relid == InvalidOid || relid == leaf_verdict.live || relid == leaf_verdict.done)
		leaf_verdict = Verdict{InvalidOid, InvalidOid, false, {}, {}};
}

void
Tables::Close()
{
	if (done)
		table_close(done, NoLock);
	if (root)
		table_close(root, NoLock);
	if (live)
		table_close(live, NoLock);
	done = root = live = nullptr;
}

bool
GoDirect(Oid namespace_id, LOCKMODE lockmode, Tables *tables, bool with_done)
{
	*tables = Tables{};
	if (IsolationUsesXactSnapshot() || XactReadOnly || IsInParallelMode() || preparing ||
	    ExecutorCheckPerms_hook != nullptr || !OidIsValid(namespace_id))
		return false;
	Oid live_id = get_relname_relid(citus::Scoped("job_live"), namespace_id);
	Oid done_id = get_relname_relid(citus::Scoped("job_done"), namespace_id);
	if (!OidIsValid(live_id) || !OidIsValid(done_id))
		return false;
	/* The verdict is asked for after the locks: the invalidations committed
	 * before are processed when they are taken. */
	tables->live = table_open(live_id, lockmode);
	if (with_done)
		tables->done = table_open(done_id, lockmode);
	/* A verdict reached across an invalidation is used once, not kept. */
	Verdict v = verdict;
	if (verdict.live != live_id || verdict.done != done_id) {
		if (tables->done == nullptr)
			tables->done = table_open(done_id, lockmode);
		uint64 seen = invalidations;
		Oid job_status = JobStatusType(namespace_id);
		v = Verdict{live_id, done_id, false, {}, {}};
		v.allowed = OidIsValid(job_status) && BareHeap(tables->live, Kind::kAlone) &&
		            BareHeap(tables->done, Kind::kDone) &&
		            HasColumnsOf(tables->live, job_row::kLive, job_status, &v.live_layout) &&
		            HasColumnsOf(tables->done, job_row::kDone, job_status, &v.done_layout);
		if (seen == invalidations)
			verdict = v;
	}
	bool allowed = v.allowed;
	tables->live_layout = v.live_layout;
	tables->done_layout = v.done_layout;
	if (allowed && with_done && tables->done->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		allowed = OpenFinishPartition(tables, lockmode, namespace_id);
	if (!allowed) {
		tables->Close();
		return false;
	}
	if (!with_done && tables->done != nullptr) {
		table_close(tables->done, NoLock);
		tables->done = nullptr;
	}
	return true;
}

void
PreparingTransaction(bool is_preparing)
{
	preparing = is_preparing;
}

Oid
EnumLabel(Oid type_id, JobStatus status)
{
	const char *label = StatusName(status);
	Oid oid = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid, ObjectIdGetDatum(type_id), CStringGetDatum(label));
	if (!OidIsValid(oid))
		elog(ERROR, "pqrun: job_status has no label %s", label);
	return oid;
}

RowWriter::RowWriter(Relation rel)
{
	estate = CreateExecutorState();
	info = makeNode(ResultRelInfo);
	InitResultRelInfo(info, rel, 0, nullptr, 0);
	ExecOpenIndices(info, false);
	expr_cache::Fill(info);
}

void
RowWriter::Close()
{
	ExecCloseIndices(info);
	FreeExecutorState(estate);
	CommandCounterIncrement();
}

} // namespace pqrun::direct_rows
