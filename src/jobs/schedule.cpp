/* src/jobs/schedule.cpp — periodic schedules (pqrun.periodic) and their firing.
 *
 * Owns the semantics of pqrun.schedule/unschedule and of the firing step of
 * a maintenance round:
 *  - a schedule's next_run is always one of its slots: a cron fire time in
 *    pqrun.cron_timezone, or creation time + k * run_every;
 *  - firing claims due rows with FOR UPDATE SKIP LOCKED, enqueues one job,
 *    and moves next_run to the first slot strictly after now(), so a slot
 *    fires once however many schedulers race, and a backlog of missed slots
 *    (server down) fires once;
 *  - each firing runs in an internal subtransaction, so one broken schedule
 *    is skipped with a WARNING instead of stopping the whole round.
 * The cron grammar itself lives in the pure cron module: its std::string
 * results never stay alive in a frame that calls PostgreSQL (ParseCronPure
 * hands back plain data).
 */
#include "jobs/schedule.hpp"
#include "pg/boundary.hpp"

#include "guc.hpp"
#include "jobs/cron_zone.hpp"
#include "jobs/queue.hpp"
#include "pg/citus.hpp"
#include "pg/spi_plans.hpp"

#include <algorithm>
#include <cstring>
#include <new>

namespace pqrun::schedule {

namespace stmts {

/* Re-running schedule() with the same timing keeps next_run, so a deploy
 * script does not postpone the schedule; changed timing or a
 * re-activation starts from the first slot after now ($10). */
spi::Statement kScheduleUpsert{
    "upsert schedule",
    "INSERT INTO pqrun.periodic AS p (name, key, job_type, payload, priority, queue, cron, run_every, active,"
    "   next_run, created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, pg_catalog.now(), pg_catalog.now())"
    " ON CONFLICT (name, key) DO UPDATE SET job_type = EXCLUDED.job_type, payload = EXCLUDED.payload,"
    "   priority = EXCLUDED.priority, queue = EXCLUDED.queue, cron = EXCLUDED.cron,"
    "   run_every = EXCLUDED.run_every, active = EXCLUDED.active,"
    "   next_run = CASE WHEN p.cron IS DISTINCT FROM EXCLUDED.cron"
    "                     OR p.run_every IS DISTINCT FROM EXCLUDED.run_every"
    "                     OR (EXCLUDED.active AND NOT p.active)"
    "                   THEN EXCLUDED.next_run ELSE p.next_run END,"
    "   updated_at = pg_catalog.now()",
    10,
    {TEXTOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, TEXTOID, TEXTOID, INTERVALOID, BOOLOID, TIMESTAMPTZOID}};

spi::Statement kScheduleRemove{
    "remove schedule", "DELETE FROM pqrun.periodic WHERE name = $1 AND key = $2", 2, {TEXTOID, TEXTOID}};

/* One due row at a time: the caller's own updates move fired rows out of
 * reach, rows other schedulers hold are skipped, and only one payload is
 * in memory at once. */
spi::Statement kScheduleDue{
    "due schedule",
    "SELECT name, key, job_type, payload, priority, queue, cron, run_every, next_run FROM pqrun.periodic"
    " WHERE active AND next_run <= pg_catalog.now() ORDER BY next_run LIMIT 1 FOR UPDATE SKIP LOCKED",
    0,
    {}};

/* The same, of the schedules whose queue is in the Citus shard $1 of
 * pqrun.job_live ($2): on Citus, a node's schedules fire in the
 * maintenance round of their queue's shard (pg/citus.hpp). */
spi::Statement kScheduleDueInShard{
    "due schedule in shard",
    "SELECT name, key, job_type, payload, priority, queue, cron, run_every, next_run FROM pqrun.periodic"
    " WHERE active AND next_run <= pg_catalog.now()"
    "   AND pg_catalog.get_shard_id_for_distribution_column($2, queue) = $1"
    " ORDER BY next_run LIMIT 1 FOR UPDATE SKIP LOCKED",
    2,
    {INT8OID, REGCLASSOID}};

/* A schedule's queue, to find its shard on Citus. */
spi::Statement kScheduleQueue{
    "schedule queue", "SELECT queue FROM pqrun.periodic WHERE name = $1 AND key = $2", 2, {TEXTOID, TEXTOID}};

spi::Statement kScheduleFired{"schedule fired",
                              "UPDATE pqrun.periodic SET last_run = next_run, last_job_id = $3, next_run = $4,"
                              "   updated_at = pg_catalog.now() WHERE name = $1 AND key = $2",
                              4,
                              {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID}};

spi::Statement kScheduleSkipped{
    "schedule skipped",
    "UPDATE pqrun.periodic SET next_run = $3, updated_at = pg_catalog.now() WHERE name = $1 AND key = $2",
    3,
    {TEXTOID, TEXTOID, TIMESTAMPTZOID}};

} // namespace stmts

using spi::Exec;

namespace {

/* ---- cron parsing across the boundary ----------------------------------- */

enum class ParseOutcome { kOk, kInvalid, kOutOfMemory, kInternal };

/* Everything ParseCronPure hands back: plain data only. */
struct CronParse {
	ParseOutcome outcome;
	bool truncated;
	cron::Schedule schedule;
	char error[1024];
};

/* ParseCronPure runs cron::Parse. Its frame owns the std::string of the
 * result and calls nothing of PostgreSQL, so no PostgreSQL error can skip
 * that destructor, and no C++ exception leaves it. */
void
ParseCronPure(const char *expr, CronParse *out) noexcept
{
	out->outcome = ParseOutcome::kInternal;
	out->truncated = false;
	out->error[0] = '\0';
	try {
		cron::ParseResult result = cron::Parse(expr);
		if (result.ok) {
			out->schedule = result.schedule;
			out->outcome = ParseOutcome::kOk;
		} else {
			size_t n = std::min(result.error.size(), sizeof(out->error) - 1);
			memcpy(out->error, result.error.data(), n);
			out->error[n] = '\0';
			out->truncated = n < result.error.size();
			out->outcome = ParseOutcome::kInvalid;
		}
	} catch (const std::bad_alloc &) {
		out->outcome = ParseOutcome::kOutOfMemory;
	} catch (...) {
		out->outcome = ParseOutcome::kInternal;
	}
}

/* ---- interval arithmetic in the cron zone -------------------------------- */

constexpr double kUsecsPerAverageMonth = 365.2425 / 12 * USECS_PER_DAY;
/* EveryNext's estimate is off by a step or two at most; this only bounds a
 * pathological interval such as '1 mon -29 days'. */
constexpr int kMaxAdjustSteps = 1000;

/* PlusIntervalIn answers ts + span with PostgreSQL's calendar arithmetic
 * (months, then days, then time), done in zone `tz` rather than the
 * session's, so the caller's TimeZone setting cannot change a schedule. */
TimestampTz
PlusIntervalIn(TimestampTz ts, const Interval *span, pg_tz *tz)
{
	pg_tz *const saved = session_timezone;
	volatile TimestampTz result = 0;
	session_timezone = tz;
	PG_TRY();
	{
		result = DatumGetTimestampTz(
		    DirectFunctionCall2(timestamptz_pl_interval, TimestampTzGetDatum(ts), PointerGetDatum(span)));
	}
	PG_FINALLY();
	{
		session_timezone = saved;
	}
	PG_END_TRY();
	return result;
}

/* PlusMultiple answers due + k * every (22008 when out of range). */
TimestampTz
PlusMultiple(TimestampTz due, const Interval *every, int64 k, pg_tz *tz)
{
	Interval scaled{};
	bool overflow = pg_mul_s64_overflow(every->time, k, &scaled.time);
	if (every->day != 0 || every->month != 0)
		overflow = overflow || k > PG_INT32_MAX ||
		           pg_mul_s32_overflow(every->day, static_cast<int32>(k), &scaled.day) ||
		           pg_mul_s32_overflow(every->month, static_cast<int32>(k), &scaled.month);
	if (overflow)
		ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE), errmsg("interval out of range")));
	return PlusIntervalIn(due, &scaled, tz);
}

TimestampTz
Now()
{
	return GetCurrentTransactionStartTimestamp();
}

/* FirstRun answers the first slot of a new (or re-timed) schedule. */
TimestampTz
FirstRun(const ScheduleArgs &args, TimestampTz now)
{
	pg_tz *tz = cron_zone::Current();
	if (!args.isnull[kCron])
		return CronNext(ParseCron(TextDatumGetCString(args.value[kCron])), now, tz);
	return PlusMultiple(now, DatumGetIntervalP(args.value[kRunEvery]), 1, tz);
}

bool
IsEmptyText(Datum value)
{
	return VARSIZE_ANY_EXHDR(DatumGetPointer(value)) == 0;
}

/* ---- firing ------------------------------------------------------------- */

/* Cap per FireDue call; what is left fires in the next round. */
constexpr int kFireBatch = 1000;
/* When a schedule cannot even compute its next slot, try again this much
 * later rather than every round. */
constexpr int64 kRetryBrokenUs = 60 * USECS_PER_SEC;

/* A due pqrun.periodic row, copied out of SPI into the current context. */
struct DueRow {
	Datum name;
	Datum key;
	Datum job_type;
	Datum payload;
	Datum queue;
	int32 priority;
	char *cron;           /* NULL for a run_every schedule */
	Interval *run_every;  /* NULL for a cron schedule */
	TimestampTz next_run; /* the slot being fired */
	const char *label;    /* for messages: "name" or "name" (key "key") */
};

Datum
CopyCol(int col, bool *isnull)
{
	Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, isnull);
	return *isnull ? Datum(0) : datumCopy(d, false, -1);
}

DueRow
CopyDueRow()
{
	DueRow row;
	bool isnull;
	row.name = CopyCol(1, &isnull);
	row.key = CopyCol(2, &isnull);
	row.job_type = CopyCol(3, &isnull);
	row.payload = CopyCol(4, &isnull);
	row.priority = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
	row.queue = CopyCol(6, &isnull);
	Datum cron_text = CopyCol(7, &isnull);
	row.cron = isnull ? nullptr : TextDatumGetCString(cron_text);
	Datum every = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 8, &isnull);
	row.run_every = isnull ? nullptr : DatumGetIntervalP(datumCopy(every, false, sizeof(Interval)));
	row.next_run = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 9, &isnull));
	const char *name = TextDatumGetCString(row.name);
	const char *key = TextDatumGetCString(row.key);
	row.label = key[0] == '\0' ? psprintf("\"%s\"", name) : psprintf("\"%s\" (key \"%s\")", name, key);
	return row;
}

/* NextAfterFire answers the slot that follows firing `row` at `now`. */
TimestampTz
NextAfterFire(const DueRow &row, TimestampTz now)
{
	pg_tz *tz = cron_zone::Current();
	if (row.cron != nullptr)
		return CronNext(ParseCron(row.cron), now, tz);
	if (row.run_every == nullptr)
		elog(ERROR, "pqrun: schedule %s has neither cron nor run_every", row.label);
	return EveryNext(row.run_every, row.next_run, now, tz);
}

/* Fire enqueues the job of `row` and records the fire. */
void
Fire(const DueRow &row, TimestampTz next)
{
	jobs::EnqueueArgs args;
	jobs::SetEnqueueDefaults(&args);
	args.value[jobs::kJobType] = row.job_type;
	args.value[jobs::kPayload] = row.payload;
	args.value[jobs::kPriority] = Int32GetDatum(row.priority);
	args.value[jobs::kQueue] = row.queue;
	for (jobs::EnqueueArg set : {jobs::kJobType, jobs::kPayload, jobs::kPriority, jobs::kQueue})
		args.isnull[set] = false;
	int64 job_id = jobs::Enqueue(args, 0);

	Datum values[4] = {row.name, row.key, Int64GetDatum(job_id), TimestampTzGetDatum(next)};
	if (Exec(stmts::kScheduleFired, values, nullptr, SPI_OK_UPDATE) != 1)
		elog(ERROR, "pqrun: schedule %s vanished while it fired", row.label);
}

/* IsOwnFault tells errors that belong to one schedule (bad data, limits,
 * user triggers), which are isolated, from those that must end the round:
 * cancel and shutdown, serialization failures and deadlocks (the round is
 * retried as a whole), resource exhaustion and internal errors. */
bool
IsOwnFault(int sqlerrcode)
{
	int category = ERRCODE_TO_CATEGORY(sqlerrcode);
	return category != ERRCODE_TRANSACTION_ROLLBACK && category != ERRCODE_INSUFFICIENT_RESOURCES &&
	       category != ERRCODE_OPERATOR_INTERVENTION && category != ERRCODE_SYSTEM_ERROR &&
	       category != ERRCODE_INTERNAL_ERROR;
}

/* FireOne fires `row` inside an internal subtransaction. On an error of the
 * schedule's own, the subtransaction is rolled back, the slot is skipped with
 * a WARNING and next_run still moves on. Answers whether a job was enqueued.
 * The row is locked by the caller's transaction. */
bool
FireOne(const DueRow &row, TimestampTz now)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool have_next = false;
	volatile TimestampTz next = 0;
	ErrorData *volatile edata = nullptr;

	BeginInternalSubTransaction(nullptr);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		TimestampTz computed = NextAfterFire(row, now);
		next = computed;
		have_next = true;
		Fire(row, computed);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(context);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();

	if (edata == nullptr)
		return true;
	if (!IsOwnFault(edata->sqlerrcode))
		ReThrowError(edata);
	ereport(WARNING, (errcode(edata->sqlerrcode), errmsg("schedule %s skipped a run: %s", row.label, edata->message),
	                  edata->detail ? errdetail_internal("%s", edata->detail) : 0));
	TimestampTz skip_to = have_next ? next : now + kRetryBrokenUs;
	Datum values[3] = {row.name, row.key, TimestampTzGetDatum(skip_to)};
	Exec(stmts::kScheduleSkipped, values, nullptr, SPI_OK_UPDATE);
	FreeErrorData(edata);
	return false;
}

} // namespace

cron::Schedule
ParseCron(const char *expr)
{
	CronParse parsed;
	ParseCronPure(expr, &parsed);
	switch (parsed.outcome) {
	case ParseOutcome::kOk:
		break;
	case ParseOutcome::kInvalid: {
		if (parsed.truncated) {
			int len = static_cast<int>(strlen(parsed.error));
			parsed.error[pg_mbcliplen(parsed.error, len, len)] = '\0';
		}
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("%s%s", parsed.error, parsed.truncated ? "..." : "")));
		break;
	}
	case ParseOutcome::kOutOfMemory:
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("pqrun: out of memory")));
		break;
	case ParseOutcome::kInternal:
		ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
		                errmsg("pqrun: unexpected exception while parsing a cron expression")));
		break;
	}
	return parsed.schedule;
}

TimestampTz
CronNext(const cron::Schedule &schedule, TimestampTz after, const pg_tz *tz)
{
	TimestampTz next;
	if (!cron_zone::NextFire(schedule, after, tz, &next))
		ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
		                errmsg("cron expression has no fire time after %s within the timestamptz range",
		                       timestamptz_to_str(after))));
	return next;
}

void
CheckRunEvery(const Interval *every)
{
	Interval zero{};
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, PointerGetDatum(every), PointerGetDatum(&zero))) <= 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
		                errmsg("run_every must be positive, not \"%s\"",
		                       DatumGetCString(DirectFunctionCall1(interval_out, PointerGetDatum(every))))));
	/* Its runs must stay valid timestamps. */
	Interval century{};
	century.time = backoff::kMaxDelayUs;
	if (DatumGetInt32(DirectFunctionCall2(interval_cmp, PointerGetDatum(every), PointerGetDatum(&century))) > 0)
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("run_every must be at most 100 years")));
}

TimestampTz
EveryNext(const Interval *every, TimestampTz due, TimestampTz now, pg_tz *tz)
{
	if (TIMESTAMP_NOT_FINITE(due) || TIMESTAMP_NOT_FINITE(now))
		ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE), errmsg("timestamp out of range")));
	int64 k = 1;
	if (now > due && every->day == 0 && every->month == 0 && every->time > 0) {
		/* Fixed length: exact. The difference of two valid timestamps always
		 * fits in 64 unsigned bits. */
		uint64 periods = (static_cast<uint64>(now) - static_cast<uint64>(due)) / static_cast<uint64>(every->time);
		if (periods >= static_cast<uint64>(PG_INT64_MAX))
			ereport(ERROR, (errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE), errmsg("timestamp out of range")));
		k = static_cast<int64>(periods) + 1;
	} else if (now > due) {
		/* Calendar parts: estimate k with average month and day lengths, then
		 * correct it with the real calendar arithmetic below. */
		double span = static_cast<double>(every->time) + every->day * static_cast<double>(USECS_PER_DAY) +
		              every->month * kUsecsPerAverageMonth;
		if (span > 0) {
			double estimate = (static_cast<double>(now) - static_cast<double>(due)) / span;
			k = static_cast<int64>(std::min(estimate, static_cast<double>(PG_INT32_MAX))) + 1;
		}
	}
	TimestampTz next = PlusMultiple(due, every, k, tz);
	for (int step = 0; next <= now; step++) {
		if (step >= kMaxAdjustSteps)
			ereport(ERROR,
			        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("run_every does not advance the schedule")));
		next = PlusMultiple(due, every, ++k, tz);
	}
	for (int step = 0; k > 1 && step < kMaxAdjustSteps; step++) {
		TimestampTz previous = PlusMultiple(due, every, k - 1, tz);
		if (previous <= now)
			break;
		next = previous;
		k--;
	}
	return next;
}

void
Validate(const ScheduleArgs &args)
{
	if (args.isnull[kName] || IsEmptyText(args.value[kName]))
		RaiseInvalid("name must not be null or empty");
	if (args.isnull[kJobType] || IsEmptyText(args.value[kJobType]))
		RaiseInvalid("job_type must not be null or empty");
	bool has_cron = !args.isnull[kCron];
	bool has_every = !args.isnull[kRunEvery];
	if (has_cron == has_every)
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("exactly one of cron and run_every must be given"),
		         errdetail("%s", has_cron ? "Both were given." : "Neither was given.")));
	static const char *const kNames[] = {"name",     "job_type", "cron",  "run_every", "payload",
	                                     "priority", "key",      "queue", "active"};
	for (ScheduleArg required : {kPayload, kPriority, kKey, kQueue, kActive})
		if (args.isnull[required])
			RaiseInvalid(psprintf("%s must not be null", kNames[required]));
	if (IsEmptyText(args.value[kQueue]))
		RaiseInvalid("queue must not be empty");
	for (ScheduleArg key : {kName, kKey, kJobType, kQueue})
		if (toast_raw_datum_size(args.value[key]) - VARHDRSZ > kMaxKeyBytes)
			RaiseInvalid(psprintf("%s must be at most %d bytes", kNames[key], kMaxKeyBytes));
	Size payload_bytes = toast_raw_datum_size(args.value[kPayload]) - VARHDRSZ;
	if (payload_bytes > static_cast<Size>(pqrun_max_payload_bytes))
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
		                errmsg("payload of %zu bytes exceeds pqrun.max_payload_bytes (%d)", payload_bytes,
		                       pqrun_max_payload_bytes)));
	if (has_cron)
		(void)ParseCron(TextDatumGetCString(args.value[kCron]));
	else
		CheckRunEvery(DatumGetIntervalP(args.value[kRunEvery]));
}

void
Upsert(const ScheduleArgs &args)
{
	Validate(args);
	/* On Citus, a schedule lives on the node of its queue (the call is
	 * delegated there), and fires in its shard's rounds. */
	if (citus::JobTablesDistributed())
		citus::EnterQueue(TextDatumGetCString(args.value[kQueue]));
	Datum values[10] = {args.value[kName],     args.value[kKey],
	                    args.value[kJobType],  args.value[kPayload],
	                    args.value[kPriority], args.value[kQueue],
	                    args.value[kCron],     args.value[kRunEvery],
	                    args.value[kActive],   TimestampTzGetDatum(FirstRun(args, Now()))};
	char nulls[11] = "          ";
	nulls[6] = args.isnull[kCron] ? 'n' : ' ';
	nulls[7] = args.isnull[kRunEvery] ? 'n' : ' ';
	Exec(stmts::kScheduleUpsert, values, nulls, SPI_OK_INSERT);
}

bool
Remove(Datum name, Datum key)
{
	Datum values[2] = {name, key};
	if (citus::JobTablesDistributed() && !citus::InShards()) {
		/* Its queue's shard scopes the removal; this node's own table
		 * says which (the statements refuse before a scope). */
		int rc = SPI_execute_with_args(stmts::kScheduleQueue.sql, 2, stmts::kScheduleQueue.argtypes, values, nullptr,
		                               true, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "pqrun: looking up schedule's queue failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 0)
			return false;
		citus::EnterQueue(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	}
	return Exec(stmts::kScheduleRemove, values, nullptr, SPI_OK_DELETE) > 0;
}

int64
FireDue()
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext fire_context = AllocSetContextCreate(caller, "pqrun schedule fire", ALLOCSET_DEFAULT_SIZES);
	TimestampTz now = Now();
	int64 fired = 0;
	for (int i = 0; i < kFireBatch; i++) {
		MemoryContextSwitchTo(fire_context);
		if (citus::InShards()) {
			Datum values[2] = {Int64GetDatum(citus::ShardOf()), ObjectIdGetDatum(citus::JobLiveShell())};
			if (Exec(stmts::kScheduleDueInShard, values, nullptr, SPI_OK_SELECT) == 0)
				break;
		} else if (Exec(stmts::kScheduleDue, nullptr, nullptr, SPI_OK_SELECT) == 0)
			break;
		DueRow row = CopyDueRow();
		spi::ForgetLastResult();
		if (FireOne(row, now))
			fired++;
		MemoryContextSwitchTo(caller);
		MemoryContextReset(fire_context);
	}
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(fire_context);
	return fired;
}

} // namespace pqrun::schedule
