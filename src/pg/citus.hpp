/* src/pg/citus.hpp — what pqrun knows of Citus.
 *
 * A table Citus distributes, replicates or adds to its metadata is, on the
 * node where it is named, a shell: its rows live in shards, and only
 * Citus's planner and executor hooks know where. pqrun's direct paths write
 * a heap below those hooks, so they must never write a Citus table (the one
 * decision, jobs/direct_rows.cpp, asks IsCitusTable). And pqrun's statements
 * are not written in the SQL Citus can plan across shards (volatile
 * functions in an UPDATE, a row's system columns in RETURNING, FOR UPDATE
 * over several shards).
 *
 * So after pqrun.distribute() (docs/citus.md), which
 * distributes pqrun.job_live and pqrun.job_done by queue, each transaction
 * works on the shards of one queue on the node that holds them, as on
 * tables of its own: its statements name the shards (pg/spi_plans.cpp),
 * its direct paths write them (a shard is a plain table to the one
 * decision), and Citus's planner never sees them. A transaction enters its
 * shards once (EnterQueue, EnterJob, EnterShard), under Citus's metadata
 * lock of the shard group in SHARE mode, as Citus's own writes take it; a
 * shard move takes it in EXCLUSIVE mode before it switches the placement.
 * Then it checks the placement is this node's. Every statement run outside
 * such a scope while the tables are distributed is refused with 0A000.
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

/* RefuseDistributed raises 0A000 when JobTablesDistributed and this
 * transaction has entered no shards. */
void RefuseDistributed();

void OnRelcacheInvalidation(Oid relid);

/* KeepNullQueueLocal makes a call of one of pqrun's delegated functions
 * in `parse` whose queue is NULL run on this node instead of being
 * delegated by Citus, which would crash hashing the NULL
 * (citus_delegation.cpp). Called before Citus plans `parse`. */
void KeepNullQueueLocal(Query *parse, ParamListInfo bound);

/* ---- The shards a transaction works on ---- */

/* InShards answers whether this transaction works on shards. */
bool InShards();

/* Scoped answers the name in schema pqrun of `name`, a job table or one
 * of job_live's indexes, for this transaction: `name` itself, or its
 * shard's. */
const char *Scoped(const char *name);

/* JobLiveShell answers pqrun.job_live's oid: the distributed table whose
 * shards these are. */
Oid JobLiveShell();

/* ShardOf answers the shard id job_live's statements are scoped to (0:
 * none). */
int64 ShardOf();

/* EnterQueue scopes this transaction to the shards of `queue` (no-op
 * unless JobTablesDistributed); 0A000 when they are on another node or
 * the transaction works on other shards already. */
void EnterQueue(const char *queue);

/* EnterJob scopes this transaction to the shards on this node that hold
 * job `job_id` (no-op unless JobTablesDistributed); P0002 when none
 * does. */
void EnterJob(int64 job_id);

/* LocalShards answers the job_live shards on this node (palloc'd, *n
 * of them); EnterShard scopes this transaction to one of them. */
int64 *LocalShards(int *n);
void EnterShard(int64 live);

/* AtTransactionEnd forgets the transaction's shards; AtSubAbort too when
 * the subtransaction that entered them (and took their lock) aborts. */
void AtTransactionEnd();
void AtSubCommit();
void AtSubAbort();

} // namespace pqrun::citus
