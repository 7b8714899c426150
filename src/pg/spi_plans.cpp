/* src/pg/spi_plans.cpp — the plan cache of pqrun's SQL statements. */
#include "pg/spi_plans.hpp"

#include "pg/citus.hpp"

namespace pqrun::spi {

namespace {

const char *
ReplaceAll(const char *sql, const char *text, const char *with)
{
	StringInfoData out;
	initStringInfo(&out);
	for (const char *at; (at = strstr(sql, text)) != nullptr; sql = at + strlen(text)) {
		appendBinaryStringInfo(&out, sql, static_cast<int>(at - sql));
		appendStringInfoString(&out, with);
	}
	appendStringInfoString(&out, sql);
	return out.data;
}

/* ---- Statements on Citus shards (citus.hpp) ---- */

constexpr const char *kJobTables[] = {"job_live", "job_done"};

/* ShardedSql answers `sql` naming the transaction's shards instead of
 * pqrun.job_live and pqrun.job_done (not their partitions, whose names go
 * on), and the enqueue's dedupe conflict by the index that includes the
 * queue, as on shards it must. */
const char *
ShardedSql(const char *sql)
{
	StringInfoData out;
	initStringInfo(&out);
	for (const char *at = sql; *at != '\0';) {
		bool replaced = false;
		for (const char *table : kJobTables) {
			size_t n = strlen("pqrun.") + strlen(table);
			if (strncmp(at, "pqrun.", 6) == 0 && strncmp(at + 6, table, strlen(table)) == 0 &&
			    !(isalnum(static_cast<unsigned char>(at[n])) || at[n] == '_')) {
				appendStringInfo(&out, "pqrun.%s", citus::Scoped(table));
				at += n;
				replaced = true;
				break;
			}
		}
		if (!replaced)
			appendStringInfoChar(&out, *at++);
	}
	const char *sharded = ReplaceAll(out.data, "ON CONFLICT (dedupe_key)", "ON CONFLICT (dedupe_key, queue)");
	/* Citus makes shards without sequence defaults (it evaluates them on
	 * the distributed table before it routes a row), so an insert into a
	 * shard names the id the distributed table's default would give. */
	char insert[NAMEDATALEN + 64];
	snprintf(insert, sizeof(insert), "INSERT INTO pqrun.%s AS j (", citus::Scoped("job_live"));
	if (strstr(sharded, insert) == nullptr)
		return sharded;
	const char *id = "pg_catalog.nextval('pqrun.job_id_seq'), ";
	const char *with_id = ReplaceAll(sharded, insert, psprintf("%sid, ", insert));
	const char *values = ReplaceAll(with_id, " VALUES (", psprintf(" VALUES (%s", id));
	if (strcmp(values, with_id) == 0)
		values = ReplaceAll(with_id, " SELECT 'READY', ", psprintf(" SELECT %s'READY', ", id));
	if (strcmp(values, with_id) == 0)
		elog(ERROR, "pqrun: an insert into job_live has no VALUES or SELECT to add its id to");
	return values;
}

struct ShardPlanKey {
	const Statement *stmt;
	int64 shard;
};
struct ShardPlan {
	ShardPlanKey key;
	SPIPlanPtr plan;
};
HTAB *shard_plans = nullptr;

SPIPlanPtr
ShardPlanFor(Statement &stmt)
{
	if (shard_plans == nullptr) {
		HASHCTL ctl{};
		ctl.keysize = sizeof(ShardPlanKey);
		ctl.entrysize = sizeof(ShardPlan);
		ctl.hcxt = CacheMemoryContext;
		shard_plans = hash_create("pqrun shard plans", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	ShardPlanKey key{&stmt, citus::ShardOf()};
	bool found;
	auto *entry = static_cast<ShardPlan *>(hash_search(shard_plans, &key, HASH_ENTER, &found));
	if (!found)
		entry->plan = nullptr;
	if (entry->plan == nullptr) {
		const char *sql = ShardedSql(stmt.sql);
		SPIPlanPtr plan = SPI_prepare_cursor(sql, stmt.nargs, stmt.argtypes, CURSOR_OPT_GENERIC_PLAN);
		if (plan == nullptr)
			elog(ERROR, "pqrun: could not prepare \"%s\" on a shard: %s", stmt.name, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pqrun: could not keep plan \"%s\"", stmt.name);
		entry->plan = plan;
	}
	return entry->plan;
}

SPIPlanPtr
PlanFor(Statement &stmt)
{
	/* Every statement pqrun runs passes here, each time it runs. */
	citus::RefuseDistributed();
	if (citus::InShards())
		return ShardPlanFor(stmt);
	if (stmt.plan == nullptr) {
		/* Generic plans: every statement is written so that its generic plan is
		 * the right one, and re-planning on each call would cost more than
		 * most of the statements take to run. */
		SPIPlanPtr plan = SPI_prepare_cursor(stmt.sql, stmt.nargs, stmt.argtypes, CURSOR_OPT_GENERIC_PLAN);
		if (plan == nullptr)
			elog(ERROR, "pqrun: could not prepare \"%s\": %s", stmt.name, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "pqrun: could not keep plan \"%s\"", stmt.name);
		stmt.plan = plan;
	}
	return stmt.plan;
}

} // namespace

void
ForgetLastResult()
{
	if (SPI_tuptable != nullptr) {
		SPI_freetuptable(SPI_tuptable);
		SPI_tuptable = nullptr;
	}
}

void
Connect()
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
}

void
Finish()
{
	if (SPI_finish() != SPI_OK_FINISH)
		elog(ERROR, "pqrun: SPI_finish failed");
}

/* InCallersContext puts back, when it goes, the memory context that was
 * current when it was made: SPI leaves its procedure's context current
 * after every call, which lives until SPI_finish, so that what a caller
 * allocated after a statement would otherwise outlive the context it
 * chose (a batch element's, a look's) and pile up for the whole call. */
struct InCallersContext {
	MemoryContext context = CurrentMemoryContext;
	~InCallersContext() { MemoryContextSwitchTo(context); }
};

uint64
Exec(Statement &stmt, Datum *values, const char *nulls, int expected_rc, long count)
{
	InCallersContext in_callers_context;
	ForgetLastResult();
	int rc = SPI_execute_plan(PlanFor(stmt), values, nulls, false, count);
	if (rc != expected_rc)
		elog(ERROR, "pqrun: statement \"%s\" failed: %s", stmt.name, SPI_result_code_string(rc));
	return SPI_processed;
}

uint64
ExecLatest(Statement &stmt, Datum *values, const char *nulls, bool own_changes)
{
	InCallersContext in_callers_context;
	ForgetLastResult();
	Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!own_changes)
		snapshot->curcid = FirstCommandId;
	int rc = SPI_execute_snapshot(PlanFor(stmt), values, nulls, snapshot, InvalidSnapshot, true, false, 0);
	UnregisterSnapshot(snapshot);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "pqrun: statement \"%s\" failed: %s", stmt.name, SPI_result_code_string(rc));
	return SPI_processed;
}

uint64
ExecInto(Statement &stmt, Datum *values, const char *nulls, DestReceiver *dest)
{
	InCallersContext in_callers_context;
	ParamListInfo params = makeParamList(stmt.nargs);
	for (int i = 0; i < stmt.nargs; i++) {
		ParamExternData &param = params->params[i];
		param.value = values[i];
		param.isnull = nulls != nullptr && nulls[i] == 'n';
		param.pflags = PARAM_FLAG_CONST;
		param.ptype = stmt.argtypes[i];
	}
	ForgetLastResult();
	SPIExecuteOptions options{};
	options.params = params;
	options.dest = dest;
	int rc = SPI_execute_plan_extended(PlanFor(stmt), &options);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "pqrun: statement \"%s\" failed: %s", stmt.name, SPI_result_code_string(rc));
	return SPI_processed;
}

} // namespace pqrun::spi
