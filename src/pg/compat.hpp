/* src/pg/compat.hpp — every PostgreSQL version difference pqrun depends on.
 *
 * pqrun targets PostgreSQL 15; newer majors are meant to need changes here
 * only. Included by pg.hpp after the server headers.
 */
#pragma once

#if PG_VERSION_NUM < 150000
#error "pqrun needs PostgreSQL 15 or later"
#endif

/* PG17 added transaction_timeout, which the maintenance worker turns off
 * with the other timeouts. */
#if PG_VERSION_NUM >= 170000
#define PQRUN_HAVE_TRANSACTION_TIMEOUT 1
#else
#define PQRUN_HAVE_TRANSACTION_TIMEOUT 0
#endif

/* PG18 carries the module's name and version in its magic block. */
#if PG_VERSION_NUM >= 180000
#define PQRUN_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "pqrun", .version = PQRUN_VERSION)
#else
#define PQRUN_MODULE_MAGIC PG_MODULE_MAGIC
#endif

namespace pqrun::compat {

/* What an update left to do for the new row version's index entries: none
 * (a HOT update), all, or (PG16 and later) only the summarizing indexes'. */
struct IndexUpdate {
	bool needed;
	bool only_summarizing;
};

/* PG16 made the update's index work an enum. */
inline TM_Result
TupleUpdate(Relation rel, ItemPointer tid, TupleTableSlot *slot, CommandId cid, TM_FailureData *tmfd,
            IndexUpdate *index_update)
{
	LockTupleMode lockmode;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;
	TM_Result result = table_tuple_update(rel, tid, slot, cid, InvalidSnapshot, InvalidSnapshot, true, tmfd, &lockmode,
	                                      &update_indexes);
	*index_update = {update_indexes != TU_None, update_indexes == TU_Summarizing};
#else
	bool update_indexes;
	TM_Result result = table_tuple_update(rel, tid, slot, cid, InvalidSnapshot, InvalidSnapshot, true, tmfd, &lockmode,
	                                      &update_indexes);
	*index_update = {update_indexes, false};
#endif
	return result;
}

/* PG16 added a flag to insert into summarizing indexes only. `update` says
 * the row is a new version of an indexed one (the index AM's hint). */
inline List *
InsertIndexTuples(ResultRelInfo *result_rel, TupleTableSlot *slot, EState *estate, bool update = false,
                  bool only_summarizing = false)
{
#if PG_VERSION_NUM >= 160000
	return ExecInsertIndexTuples(result_rel, slot, estate, update, false, nullptr, NIL, only_summarizing);
#else
	return ExecInsertIndexTuples(result_rel, slot, estate, update, false, nullptr, NIL);
#endif
}

/* PG18 added CHECK constraints that are not enforced; the executor leaves
 * their state null. */
inline bool
CheckEnforced(const ConstrCheck &check)
{
#if PG_VERSION_NUM >= 180000
	return check.ccenforced;
#else
	return true;
#endif
}

/* PG18 added instrumentation to index scans. */
inline IndexScanDesc
IndexBeginScan(Relation heap, Relation index, Snapshot snapshot, int nkeys)
{
#if PG_VERSION_NUM >= 180000
	return index_beginscan(heap, index, snapshot, nullptr, nkeys, 0);
#else
	return index_beginscan(heap, index, snapshot, nkeys, 0);
#endif
}

/* PG18 renamed ResultRelInfo's compiled CHECK constraints. */
inline ExprState **&
CheckConstraintExprs(ResultRelInfo *info)
{
#if PG_VERSION_NUM >= 180000
	return info->ri_CheckConstraintExprs;
#else
	return info->ri_ConstraintExprs;
#endif
}

/* PG18 added whether a deferrable primary key will do (it will not). */
inline Oid
PrimaryKeyIndex(Relation rel)
{
#if PG_VERSION_NUM >= 180000
	return RelationGetPrimaryKeyIndex(rel, false);
#else
	return RelationGetPrimaryKeyIndex(rel);
#endif
}

/* PG17 renamed the lookup of a backend in this transaction's snapshot of
 * the backend status table (1-based index, as before). */
inline LocalPgBackendStatus *
LocalBackendStatus(int index)
{
#if PG_VERSION_NUM >= 170000
	return pgstat_get_local_beentry_by_index(index);
#else
	return pgstat_fetch_stat_local_beentry(index);
#endif
}

/* This backend's index into the PGPROC array, which per-backend shared
 * tables (wake.cpp's waiters) are indexed by: PG17 moved it from
 * MyProc->pgprocno to MyProcNumber; -1 before it is known. */
inline int
MyProcIndex()
{
#if PG_VERSION_NUM >= 170000
	return MyProcNumber;
#else
	return MyProc != nullptr ? MyProc->pgprocno : -1;
#endif
}

/* Whether this process is a background worker: PG17 replaced the
 * IsBackgroundWorker flag by the backend type. */
inline bool
InBackgroundWorker()
{
#if PG_VERSION_NUM >= 170000
	return AmBackgroundWorkerProcess();
#else
	return IsBackgroundWorker;
#endif
}

/* The wait event a pqrun sleep shows in pg_stat_activity: PG17 lets an
 * extension name its own (wait_event_type "Extension", wait_event NAME),
 * registered once per cluster and looked up once per process; before, all
 * show as "Extension". */
inline uint32
ExtensionWaitEvent(uint32 &cached, const char *name)
{
#if PG_VERSION_NUM >= 170000
	if (cached == 0)
		cached = WaitEventExtensionNew(name);
	return cached;
#else
	(void)cached;
	(void)name;
	return PG_WAIT_EXTENSION;
#endif
}

/* The `extra` a GUC check hook hands back: PG16 frees it with guc_free,
 * a pfree in the GUC memory context, where earlier versions call free(). */
inline void *
GucExtraAlloc(size_t size)
{
#if PG_VERSION_NUM >= 160000
	return guc_malloc(LOG, size);
#else
	return malloc(size);
#endif
}

} // namespace pqrun::compat
