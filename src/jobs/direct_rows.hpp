/* src/jobs/direct_rows.hpp — what writing pqrun's rows below the executor needs.
 *
 * enqueue_direct.cpp, pick_direct.cpp, claim_direct.cpp and
 * finish_direct.cpp lock and write job rows with the table access methods,
 * as COPY and logical replication do. These are the checks and the
 * executor state they share.
 */
#pragma once

#include "pg/pg.hpp"

#include "jobs/job_row.hpp"
#include "jobs/job_status.hpp"

namespace pqrun::direct_rows {

/* Layout is where each column of job_row.hpp is in one job table, by
 * attribute number (InvalidAttrNumber: not there, as a column of the
 * other table, or one an update adds before the update), and the labels of
 * its job_status: found with GoDirect's verdict on the table, kept with it,
 * and shared by the four direct paths. */
struct Layout {
	AttrNumber at[job_row::kCount];
	Oid status_type;
	Oid ready, running, done;
};

/* Tables are pqrun's two job tables, open for a write below the
 * executor, with their layouts. */
struct Tables {
	Relation live = nullptr;
	Relation done = nullptr; /* the partition a finish writes to, when partitioned */
	Relation root = nullptr; /* job_done itself then */
	Layout live_layout{};
	Layout done_layout{}; /* `done`'s, when it is open */

	void Close();
};

/* GoDirect is the one place that decides whether a job operation may run
 * below the executor; every direct path (pick, claim, enqueue, finish) asks
 * it first and takes the SQL path when it answers false, with nothing left
 * open. It answers true, with job_live and job_done of schema
 * `namespace_id` open with `lockmode`, only when the executor would
 * enforce nothing the direct paths do not:
 *  - the transaction is READ COMMITTED (REPEATABLE READ and SERIALIZABLE
 *    need serialization failures and predicate locks), writable, not in
 *    parallel mode and not being prepared;
 *  - no loaded module checks every statement's tables
 *    (ExecutorCheckPerms_hook: pgaudit's audit log, sepgsql);
 *  - both tables are plain heap tables (no partitions, other access
 *    methods, triggers, rules, row security or publications), but for
 *    job_done's partitioning by finish time (0.12.0): a finish then writes
 *    to the partition by range the executor's routing would choose (never
 *    the default one), which must be such a table itself (with_done:
 *    `tables->done` is that partition and `tables->root` job_done);
 *  - both have exactly pqrun's columns, by name and type (so no column an
 *    operator added, none whose type was changed or is a domain over it).
 * CHECK and NOT NULL constraints, defaults and unique indexes the direct
 * paths enforce themselves, as COPY does. The verdict on the tables is kept
 * until a relcache invalidation of either; job_done is left closed unless
 * `with_done` (a pick, a claim or an enqueue writes job_live only). */
bool GoDirect(Oid namespace_id, LOCKMODE lockmode, Tables *tables, bool with_done);

/* OnRelcacheInvalidation forgets the verdict on the job tables when either
 * (or every relation: InvalidOid) is invalidated; the relcache callback,
 * hooks.cpp. */
void OnRelcacheInvalidation(Oid relid);

/* PreparingTransaction marks the transaction as being prepared (its
 * deferred claims are then written through SQL). */
void PreparingTransaction(bool preparing);

/* EnumLabel answers the oid of the label of `status` in enum type `type_id`
 * (pqrun.job_status). */
Oid EnumLabel(Oid type_id, JobStatus status);

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
