/* src/api/sql_api.cpp — every SQL-callable function of pqrun.
 *
 * Each entry point unpacks its arguments, validates what the SQL signature
 * cannot (SQLSTATE 22023 for bad values), runs the queue logic inside one
 * SPI connection and packs the result. Nothing else lives here.
 */
#include "bgw/maintenance.hpp"
#include "jobs/flow_control.hpp"
#include "jobs/lease_token.hpp"
#include "jobs/queue.hpp"
#include "pg/boundary.hpp"
#include "pg/spi_plans.hpp"
#include "pure/backoff.hpp"
#include "shmem/shmem.hpp"
#include "shmem/stats.hpp"
#include "xact/wake.hpp"

namespace {

using namespace pqrun;

/* RequireArg rejects a NULL for an argument that has no meaning as NULL. */
void
RequireArg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		RaiseInvalid(psprintf("%s must not be null", name));
}

int64
JobIdArg(FunctionCallInfo fcinfo)
{
	RequireArg(fcinfo, 0, "job_id");
	return PG_GETARG_INT64(0);
}

/* OptionalTextArray answers a text[] argument, NULL for SQL NULL, and
 * rejects empty arrays and NULL elements. */
ArrayType *
OptionalTextArray(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		return nullptr;
	ArrayType *array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)) == 0)
		RaiseInvalid(psprintf("%s must not be empty (use NULL for any)", name));
	if (array_contains_nulls(array))
		RaiseInvalid(psprintf("%s must not contain nulls", name));
	return array;
}

/* IntervalUs answers `interval` in microseconds, a month counted as 30
 * days, saturated at the int64 range (so huge and infinite intervals keep
 * their sign). */
int64
IntervalUs(const Interval *interval)
{
	__int128 us = static_cast<__int128>(interval->time) +
	              (static_cast<__int128>(interval->day) + static_cast<__int128>(interval->month) * 30) * USECS_PER_DAY;
	return us > INT64_MAX ? INT64_MAX : us < INT64_MIN ? INT64_MIN : static_cast<int64>(us);
}

bool
IsNegative(const Interval *interval)
{
	return IntervalUs(interval) < 0;
}

/* A wait longer than a century is as good as one of a century. */
int64
WaitMs(const Interval *wait)
{
	return Min(IntervalUs(wait), backoff::kMaxDelayUs) / 1000;
}

/* Longer than anything that finished or went stale since timestamps began:
 * "older than" it matches nothing, as any longer age would, and now() minus
 * it stays a valid timestamp. */
constexpr int64 kAgesUs = 5000LL * 365 * USECS_PER_DAY;

/* AgeArg answers an "older than" interval argument, bounded by kAgesUs. */
const Interval *
AgeArg(const Interval *age)
{
	if (IntervalUs(age) <= kAgesUs)
		return age;
	auto *bounded = static_cast<Interval *>(palloc0(sizeof(Interval)));
	bounded->time = kAgesUs;
	return bounded;
}

/* BeginSetResult prepares a materialized set result: one column of
 * scalar_type, or the function's declared row type for InvalidOid. */
ReturnSetInfo *
BeginSetResult(FunctionCallInfo fcinfo, Oid scalar_type)
{
	auto *rsinfo = reinterpret_cast<ReturnSetInfo *>(fcinfo->resultinfo);
	if (rsinfo == nullptr || !IsA(rsinfo, ReturnSetInfo) || !(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("set-valued function called in context that cannot accept a set")));
	MemoryContext old = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	TupleDesc desc;
	if (scalar_type == InvalidOid) {
		if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "pqrun: return type must be a row type");
		desc = CreateTupleDescCopy(desc);
	} else {
		desc = CreateTemplateTupleDesc(1);
		TupleDescInitEntry(desc, 1, "id", scalar_type, -1, 0);
	}
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = desc;
	MemoryContextSwitchTo(old);
	return rsinfo;
}

using spi::Connect;
using spi::Finish;

} // namespace

PQRUN_FUNCTION(pqrun_enqueue)
{
	jobs::EnqueueArgs args;
	for (int i = 0; i < jobs::kEnqueueArgCount; i++) {
		args.isnull[i] = PG_ARGISNULL(i);
		args.value[i] = args.isnull[i] ? Datum(0) : PG_GETARG_DATUM(i);
	}
	Connect();
	int64 id = jobs::Enqueue(args, 0);
	Finish();
	PG_RETURN_INT64(id);
}

PQRUN_FUNCTION(pqrun_enqueue_batch)
{
	if (PG_ARGISNULL(0))
		RaiseInvalid("jobs must be a JSON array of objects, not null");
	Jsonb *jobs = PG_GETARG_JSONB_P(0);
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, INT8OID);
	Connect();
	jobs::EnqueueBatch(jobs, rsinfo->setResult, rsinfo->setDesc);
	Finish();
	return Datum(0);
}

/* PickUpCall is pickup and pickup_from: worker_id is argument 0,
 * batch_size and wait are arguments `batch` and `batch` + 1. */
Datum
PickUpCall(FunctionCallInfo fcinfo, ArrayType *job_types, ArrayType *queues, int batch)
{
	RequireArg(fcinfo, 0, "worker_id");
	RequireArg(fcinfo, batch, "batch_size");
	RequireArg(fcinfo, batch + 1, "wait");
	int32 batch_size = PG_GETARG_INT32(batch);
	if (batch_size < 1)
		RaiseInvalid(psprintf("batch_size must be at least 1, not %d", batch_size));
	const Interval *wait = PG_GETARG_INTERVAL_P(batch + 1);
	if (IsNegative(wait))
		RaiseInvalid("wait must not be negative");
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, InvalidOid);
	Connect();
	jobs::PickUp(PG_GETARG_TEXT_PP(0), PickFilter{job_types, queues}, batch_size, WaitMs(wait), rsinfo->setResult,
	              rsinfo->setDesc);
	Finish();
	return Datum(0);
}

PQRUN_FUNCTION(pqrun_pickup)
{
	return PickUpCall(fcinfo, OptionalTextArray(fcinfo, 1, "job_types"), OptionalTextArray(fcinfo, 2, "queues"), 3);
}

/* pickup_from(worker_id, queue, batch_size, wait, job_types): a pickup from
 * one queue, which Citus delegates by `queue` (0.15.0). */
PQRUN_FUNCTION(pqrun_pickup_from)
{
	RequireArg(fcinfo, 1, "queue");
	Datum queue = PG_GETARG_DATUM(1);
	return PickUpCall(fcinfo, OptionalTextArray(fcinfo, 4, "job_types"),
	                  construct_array(&queue, 1, TEXTOID, -1, false, TYPALIGN_INT), 2);
}

/* QueueArg: a job-id call's last argument, `queue`, when it is given
 * (jobs::InQueue). After Connect. */
void
QueueArg(FunctionCallInfo fcinfo, int argno, ArrayType *job_ids)
{
	if (!PG_ARGISNULL(argno))
		jobs::InQueue(text_to_cstring(PG_GETARG_TEXT_PP(argno)), job_ids);
}

void
QueueArg(FunctionCallInfo fcinfo, int argno, int64 job_id)
{
	if (!PG_ARGISNULL(argno)) {
		Datum id = Int64GetDatum(job_id);
		QueueArg(fcinfo, argno, construct_array(&id, 1, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
}

PQRUN_FUNCTION(pqrun_mark_done)
{
	int64 job_id = JobIdArg(fcinfo);
	Connect();
	QueueArg(fcinfo, 3, job_id);
	jobs::MarkDone(job_id, PG_ARGISNULL(1) ? Datum(0) : PG_GETARG_DATUM(1), PG_ARGISNULL(1),
	                PG_ARGISNULL(2) ? Datum(0) : PG_GETARG_DATUM(2), !PG_ARGISNULL(2));
	Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_mark_done_batch)
{
	RequireArg(fcinfo, 0, "job_ids");
	ArrayType *job_ids = PG_GETARG_ARRAYTYPE_P(0);
	ArrayType *lease_tokens = PG_ARGISNULL(1) ? nullptr : PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(job_ids) > 1 || (lease_tokens && ARR_NDIM(lease_tokens) > 1))
		RaiseInvalid("job_ids and lease_tokens must be one-dimensional arrays");
	Connect();
	QueueArg(fcinfo, 2, job_ids);
	int32 count = jobs::MarkDoneBatch(job_ids, lease_tokens);
	Finish();
	PG_RETURN_INT32(count);
}

/* One-dimensional array argument `argno`, or nullptr for SQL NULL. */
ArrayType *
OptionalArray(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		return nullptr;
	ArrayType *array = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(array) > 1)
		RaiseInvalid(psprintf("%s must be a one-dimensional array", name));
	return array;
}

PQRUN_FUNCTION(pqrun_mark_done_and_pickup)
{
	RequireArg(fcinfo, 0, "worker_id");
	RequireArg(fcinfo, 6, "batch_size");
	ArrayType *job_ids = OptionalArray(fcinfo, 1, "job_ids");
	ArrayType *lease_tokens = OptionalArray(fcinfo, 2, "lease_tokens");
	ArrayType *results = OptionalArray(fcinfo, 3, "results");
	if (job_ids == nullptr && (lease_tokens || results))
		RaiseInvalid("lease_tokens and results need job_ids");
	ArrayType *job_types = OptionalTextArray(fcinfo, 4, "job_types");
	ArrayType *queues = OptionalTextArray(fcinfo, 5, "queues");
	int32 batch_size = PG_GETARG_INT32(6);
	if (batch_size < 1)
		RaiseInvalid(psprintf("batch_size must be at least 1, not %d", batch_size));
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, InvalidOid);
	Connect();
	/* The finish first: a stale lease raises (55000) before anything is
	 * claimed. The pickup never waits, so the finish is never held back. */
	if (job_ids)
		jobs::MarkDoneEach(job_ids, lease_tokens, results);
	jobs::PickUp(PG_GETARG_TEXT_PP(0), PickFilter{job_types, queues}, batch_size, 0, rsinfo->setResult, rsinfo->setDesc);
	Finish();
	return Datum(0);
}

PQRUN_FUNCTION(pqrun_mark_error)
{
	int64 job_id = JobIdArg(fcinfo);
	RequireArg(fcinfo, 2, "terminal");
	const char *error = PG_ARGISNULL(1) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(1));
	const Interval *retry_after = PG_ARGISNULL(4) ? nullptr : PG_GETARG_INTERVAL_P(4);
	if (retry_after && IsNegative(retry_after))
		RaiseInvalid("retry_after must not be negative");
	if (retry_after && IntervalUs(retry_after) > backoff::kMaxDelayUs)
		RaiseInvalid("retry_after must be at most 100 years");
	Connect();
	QueueArg(fcinfo, 5, job_id);
	JobStatus status = jobs::MarkError(job_id, error, PG_GETARG_BOOL(2),
	                                    PG_ARGISNULL(3) ? Datum(0) : PG_GETARG_DATUM(3), !PG_ARGISNULL(3), retry_after);
	Finish();
	Oid status_type = get_fn_expr_rettype(fcinfo->flinfo);
	return DirectFunctionCall2(enum_in, CStringGetDatum(StatusName(status)), ObjectIdGetDatum(status_type));
}

/* What a worker may report as its job's progress: a status, not a result. */
constexpr Size kMaxProgressBytes = 8192;

PQRUN_FUNCTION(pqrun_heartbeat)
{
	int64 job_id = JobIdArg(fcinfo);
	bool has_progress = !PG_ARGISNULL(2);
	Datum progress = has_progress ? PG_GETARG_DATUM(2) : Datum(0);
	if (has_progress && toast_raw_datum_size(progress) - VARHDRSZ > kMaxProgressBytes)
		RaiseInvalid(psprintf("progress must be at most %zu bytes", kMaxProgressBytes));
	RequireArg(fcinfo, 3, "wait");
	const Interval *wait = PG_GETARG_INTERVAL_P(3);
	if (IsNegative(wait))
		RaiseInvalid("wait must not be negative");
	int64 wait_ms = WaitMs(wait);
	/* Its snapshot could never show the job cancelled during the wait. */
	if (wait_ms > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("a waiting heartbeat needs a READ COMMITTED transaction"),
		                errdetail("Under REPEATABLE READ or SERIALIZABLE its snapshot cannot see the job end while "
		                          "it waits.")));
	Connect();
	QueueArg(fcinfo, 4, job_id);
	jobs::Heartbeat(job_id, PG_ARGISNULL(1) ? Datum(0) : PG_GETARG_DATUM(1), !PG_ARGISNULL(1), progress, has_progress,
	                 wait_ms);
	Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_release)
{
	int64 job_id = JobIdArg(fcinfo);
	Connect();
	QueueArg(fcinfo, 2, job_id);
	jobs::GiveBack(job_id, PG_ARGISNULL(1) ? Datum(0) : PG_GETARG_DATUM(1), !PG_ARGISNULL(1),
	                GetCurrentTransactionStartTimestamp(), false);
	Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_snooze)
{
	int64 job_id = JobIdArg(fcinfo);
	RequireArg(fcinfo, 1, "delay");
	const Interval *delay = PG_GETARG_INTERVAL_P(1);
	if (IsNegative(delay))
		RaiseInvalid("delay must not be negative");
	if (IntervalUs(delay) > backoff::kMaxDelayUs)
		RaiseInvalid("delay must be at most 100 years");
	TimestampTz run_after = DatumGetTimestampTz(DirectFunctionCall2(
	    timestamptz_pl_interval, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()), PointerGetDatum(delay)));
	Connect();
	QueueArg(fcinfo, 3, job_id);
	jobs::GiveBack(job_id, PG_ARGISNULL(2) ? Datum(0) : PG_GETARG_DATUM(2), !PG_ARGISNULL(2), run_after, true);
	Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_reap_stale)
{
	RequireArg(fcinfo, 0, "default_stale_after");
	const Interval *stale_after = PG_GETARG_INTERVAL_P(0);
	if (IsNegative(stale_after))
		RaiseInvalid("default_stale_after must not be negative");
	stale_after = AgeArg(stale_after);
	Connect();
	int32 reaped = maintenance::ReapStale(stale_after);
	Finish();
	PG_RETURN_INT32(reaped);
}

PQRUN_FUNCTION(pqrun_cancel)
{
	int64 job_id = JobIdArg(fcinfo);
	const char *reason = PG_ARGISNULL(1) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(1));
	Connect();
	QueueArg(fcinfo, 2, job_id);
	bool cancelled = jobs::Cancel(job_id, reason);
	Finish();
	PG_RETURN_BOOL(cancelled);
}

PQRUN_FUNCTION(pqrun_retry)
{
	int64 job_id = JobIdArg(fcinfo);
	Connect();
	QueueArg(fcinfo, 1, job_id);
	bool retried = jobs::Retry(job_id);
	Finish();
	PG_RETURN_BOOL(retried);
}

PQRUN_FUNCTION(pqrun_purge)
{
	RequireArg(fcinfo, 0, "older_than");
	RequireArg(fcinfo, 1, "statuses");
	const Interval *older_than = PG_GETARG_INTERVAL_P(0);
	if (IsNegative(older_than))
		RaiseInvalid("older_than must not be negative");
	older_than = AgeArg(older_than);
	Oid output_function;
	bool is_varlena;
	getTypeOutputInfo(get_fn_expr_argtype(fcinfo->flinfo, 1), &output_function, &is_varlena);
	const char *statuses = OidOutputFunctionCall(output_function, PG_GETARG_DATUM(1));
	Connect();
	int64 purged = jobs::Purge(older_than, statuses);
	Finish();
	PG_RETURN_INT64(purged);
}

PQRUN_FUNCTION(pqrun_run_maintenance)
{
	Connect();
	maintenance::Counts counts = maintenance::Run();
	Finish();
	const char *json =
	    psprintf("{\"reaped\": %d, \"orphaned\": %lld, \"scheduled\": %lld, \"unblocked\": %lld, \"promoted\": %lld, "
	             "\"purged\": %lld}",
	             counts.reaped, (long long)counts.orphaned, (long long)counts.scheduled, (long long)counts.unblocked,
	             (long long)counts.promoted, (long long)counts.purged);
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(json));
}

/* pqrun._lease_token(): see lease_token.hpp. */
PQRUN_FUNCTION_ANY_VERSION(pqrun_lease_token)
{
	auto *uuid = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t)));
	lease_token::New(uuid);
	PG_RETURN_UUID_P(uuid);
}

/* pqrun._backend_started(): when this backend started. */
PQRUN_FUNCTION_ANY_VERSION(pqrun_backend_started)
{
	PG_RETURN_TIMESTAMPTZ(MyStartTimestamp);
}

/* Called by the install script: lets the launcher start this database's
 * maintenance worker now rather than at its next scan. */
PQRUN_FUNCTION_ANY_VERSION(pqrun_register_database)
{
	shmem::RegisterDatabase(MyDatabaseId, 15000);
	stats::ResetDatabase();
	wake::ResetDatabase();
	flow_control::ResetDatabase();
	PG_RETURN_VOID();
}

/* CALL pqrun.await_jobs(...) waits, without holding a snapshot, until a job
 * matching the filters is runnable or `wait` ends, and answers which. It
 * commits before every sleep, so it must be CALLed outside an explicit
 * transaction block; the caller then picks up with pqrun.pickup(). */
PQRUN_FUNCTION(pqrun_await_jobs)
{
	auto *call_context = reinterpret_cast<CallContext *>(fcinfo->context);
	if (call_context == nullptr || !IsA(call_context, CallContext) || call_context->atomic)
		ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
		                errmsg("pqrun.await_jobs must be called with CALL outside a transaction block")));
	RequireArg(fcinfo, 2, "wait");
	ArrayType *job_types = OptionalTextArray(fcinfo, 0, "job_types");
	ArrayType *queues = OptionalTextArray(fcinfo, 1, "queues");
	const Interval *wait = PG_GETARG_INTERVAL_P(2);
	if (IsNegative(wait))
		RaiseInvalid("wait must not be negative");
	TupleDesc desc;
	if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "pqrun: await_jobs must have an INOUT argument");
	desc = BlessTupleDesc(CreateTupleDescCopy(desc));

	if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT)
		elog(ERROR, "pqrun: SPI_connect failed");
	bool ready = jobs::AwaitJobs(PickFilter{job_types, queues}, WaitMs(wait));
	Finish();
	Datum value = BoolGetDatum(ready);
	bool isnull = false;
	return HeapTupleGetDatum(heap_form_tuple(desc, &value, &isnull));
}

/* Rows behind pqrun.queue_stats: stored finished jobs and the last five
 * minutes' activity per (queue, job_type), from shared memory. */
PQRUN_FUNCTION(pqrun_queue_counters)
{
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, InvalidOid);
	Connect();
	stats::Report(rsinfo->setResult, rsinfo->setDesc);
	Finish();
	return Datum(0);
}

/* pqrun._shared_counters() behind pqrun.metrics(): rows (metric, label,
 * value) of what only shared memory knows: RUNNING jobs this database's
 * maintenance put back since its slot was taken, and how full each of
 * pqrun's fixed-size tables is. */
PQRUN_FUNCTION_ANY_VERSION(pqrun_shared_counters)
{
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, InvalidOid);
	auto row = [&](const char *metric, const char *label, int64 value) {
		Datum values[3] = {CStringGetTextDatum(metric), CStringGetTextDatum(label), Int64GetDatum(value)};
		bool nulls[3] = {false, false, false};
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	};
	shmem::Rescues rescued{};
	if (shmem::RescuesOf(MyDatabaseId, &rescued)) {
		row("rescued_total", "stale", static_cast<int64>(rescued.stale));
		row("rescued_total", "orphaned", static_cast<int64>(rescued.orphaned));
	}
	if (shmem::Shared() == nullptr)
		return Datum(0);
	shmem::TableUsage tables[5];
	tables[0] = shmem::DatabasesUsage();
	tables[1] = stats::Usage();
	int n = 2 + flow_control::Usage(tables + 2);
	for (int i = 0; i < n; i++) {
		row("shared_memory_entries", tables[i].table, tables[i].used);
		row("shared_memory_capacity", tables[i].table, tables[i].capacity);
	}
	return Datum(0);
}

/* pqrun._flow_counters() behind pqrun.queue_controls: what shared memory
 * counts for each limit and rate limit of this database. */
PQRUN_FUNCTION(pqrun_flow_counters)
{
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, InvalidOid);
	flow_control::Report(rsinfo->setResult, rsinfo->setDesc);
	return Datum(0);
}

/* pqrun._key_buckets() behind pqrun.queue_controls: how many keys of each
 * rate limit per key of this database are below a full bucket, and without
 * a token. */
PQRUN_FUNCTION(pqrun_key_buckets)
{
	ReturnSetInfo *rsinfo = BeginSetResult(fcinfo, InvalidOid);
	flow_control::ReportKeyBuckets(rsinfo->setResult, rsinfo->setDesc);
	return Datum(0);
}
