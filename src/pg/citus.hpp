/* src/pg/citus.hpp — what pqrun knows of Citus.
 *
 * A table Citus distributes, replicates or adds to its metadata is, on the
 * node where it is named, a shell: its rows live in shards, and only
 * Citus's planner and executor hooks know where. pqrun's direct paths write
 * a heap below those hooks, so they must never write a Citus table (the one
 * decision, jobs/direct_rows.cpp, asks IsCitusTable). And pqrun's statements
 * are not written in the SQL Citus can plan across shards (volatile
 * functions in an UPDATE, a row's system columns in RETURNING, FOR UPDATE
 * over several shards), so an operation on pqrun's job tables as Citus
 * tables is refused with 0A000 before it runs a statement, and the
 * maintenance worker leaves such a database alone. pqrun installed on each
 * node of a Citus cluster runs there on that node's own tables.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::citus {

/* IsCitusTable answers whether `relid` is in Citus's metadata
 * (pg_dist_partition): a distributed, reference or Citus local table, or a
 * partition of one. False when Citus is not installed in this database. */
bool IsCitusTable(Oid relid);

/* JobTablesDistributed answers whether pqrun.job_live or pqrun.job_done
 * of this database is a Citus table; kept until the next relcache
 * invalidation (distributing a table gives it Citus's truncate trigger,
 * which sends one). */
bool JobTablesDistributed();

/* RefuseDistributed raises 0A000 when JobTablesDistributed. */
void RefuseDistributed();

void OnRelcacheInvalidation(Oid relid);

} // namespace pqrun::citus
