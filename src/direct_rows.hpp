/* src/direct_rows.hpp — what writing pqrun's rows below the executor needs.
 *
 * direct_enqueue.cpp, direct_pick.cpp, direct_claim.cpp and
 * direct_finish.cpp lock and write job rows with the table access methods,
 * as COPY and logical replication do. These are the checks and the
 * executor state they share.
 */
#pragma once

#include "pg.hpp"

namespace pqrun::direct_rows {

/* PlainTable answers whether `rel` has nothing only the executor honours:
 * operators may add triggers, rules, row security or generated columns to
 * pqrun's tables, partition them or change their access method, and load
 * a module that sees every statement's tables (ExecutorCheckPerms_hook:
 * pgaudit's audit log, sepgsql's access control). */
bool PlainTable(Relation rel);

/* OpenPlain opens table `name` of schema `namespace_id` with `lockmode`
 * (for writing unless told) when it exists and is a PlainTable; else
 * answers nullptr, leaving it closed. */
Relation OpenPlain(Oid namespace_id, const char *name, LOCKMODE lockmode = RowExclusiveLock);

/* FindAttNum finds a column of `rel` by name (InvalidAttrNumber if there is
 * none); RequireAttNum raises if it is missing. */
AttrNumber FindAttNum(Relation rel, const char *name);
AttrNumber RequireAttNum(Relation rel, const char *name);

/* EnumLabel answers the oid of label `label` of enum type `type_id`. */
Oid EnumLabel(Oid type_id, const char *label);

/* RowWriter holds a table's indexes and constraints, as the executor checks
 * and fills them. Close ends the write with a statement boundary
 * (CommandCounterIncrement, as SPI makes after each statement), so that what
 * follows sees the rows written. */
struct RowWriter {
	EState *estate;
	ResultRelInfo *info;

	explicit RowWriter(Relation rel);
	void Close();
};

} // namespace pqrun::direct_rows
