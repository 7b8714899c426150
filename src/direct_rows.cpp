/* src/direct_rows.cpp — what writing pqrun's rows below the executor needs. */
#include "direct_rows.hpp"

#include "expr_cache.hpp"

namespace pqrun::direct_rows {

bool
PlainTable(Relation rel)
{
	/* The relcache's trigger and rule sets, not relhastriggers and
	 * relhasrules, which stay set after the last one is dropped. A module
	 * with ExecutorCheckPerms_hook must see every table a statement reads
	 * or writes. */
	return ExecutorCheckPerms_hook == nullptr && rel->rd_rel->relkind == RELKIND_RELATION &&
	       rel->rd_rel->relam == HEAP_TABLE_AM_OID && !rel->rd_rel->relispartition && rel->trigdesc == nullptr &&
	       (rel->rd_rules == nullptr || rel->rd_rules->numLocks == 0) && !rel->rd_rel->relrowsecurity &&
	       !(rel->rd_att->constr && rel->rd_att->constr->has_generated_stored);
}

Relation
OpenPlain(Oid namespace_id, const char *name, LOCKMODE lockmode)
{
	Oid relid = get_relname_relid(name, namespace_id);
	if (!OidIsValid(relid))
		return nullptr;
	Relation rel = table_open(relid, lockmode);
	if (PlainTable(rel))
		return rel;
	table_close(rel, NoLock);
	return nullptr;
}

AttrNumber
FindAttNum(Relation rel, const char *name)
{
	TupleDesc desc = RelationGetDescr(rel);
	for (int i = 0; i < desc->natts; i++) {
		Form_pg_attribute att = TupleDescAttr(desc, i);
		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att->attnum;
	}
	return InvalidAttrNumber;
}

AttrNumber
RequireAttNum(Relation rel, const char *name)
{
	AttrNumber attnum = FindAttNum(rel, name);
	if (attnum == InvalidAttrNumber)
		elog(ERROR, "pqrun: %s has no column %s", RelationGetRelationName(rel), name);
	return attnum;
}

Oid
EnumLabel(Oid type_id, const char *label)
{
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
