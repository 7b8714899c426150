/* src/jobs/enqueue.cpp — pqrun.enqueue and pqrun.enqueue_batch.
 *
 * A single enqueue validates its arguments, resolves dependencies (locking
 * the unfinished ones), takes its FIFO group lock and inserts one row; a job
 * with none of these and no dedupe key is inserted below the executor
 * (enqueue_direct.hpp). enqueue_batch writes runs of plain elements (no
 * depends_on, fifo_key or concurrency_key) together, below the executor when none has a
 * dedupe key, else with one INSERT per run, which is what makes it about ten
 * times cheaper per job than single enqueues; the other elements go through
 * Enqueue one by one, so ids still follow element order.
 */
#include "jobs/queue.hpp"
#include "pg/citus.hpp"
#include "jobs/queue_internal.hpp"

#include "guc.hpp"
#include "api/batch_input.hpp"
#include "jobs/enqueue_direct.hpp"
#include "jobs/flow_control.hpp"
#include "jobs/job_row.hpp"
#include "pg/boundary.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"
#include "shmem/stats.hpp"
#include "xact/next_due.hpp"
#include "xact/wake.hpp"

#include <algorithm>

namespace pqrun::jobs {

namespace stmts {

/* Inserts into job_live. A job with a dedupe key that an unfinished job
 * holds answers that job (whose xmax is then set); without any dedupe key
 * nothing can conflict, and the keyless form skips the speculative insertion
 * (a lock and a confirmation record per row). Keyless runs of enqueue_batch
 * are inserted below the executor (enqueue_direct.hpp); the run statement
 * serves the others, and keyless runs only when that path declines. */
#define INSERT_LIVE                                                                                                    \
	"INSERT INTO pqrun.job_live AS j (status, delayed, priority, max_attempts, timeout_seconds, run_after,"            \
	"   created_at, updated_at, queue, job_type, dedupe_key, fifo_key, depends_on, payload" PQRUN_JOB_KEY              \
	    PQRUN_JOB_WEIGHT ")"                                                                                           \
	" VALUES ($1::pqrun.job_status, $2, $3, $4, $5, $6, pg_catalog.now(), pg_catalog.now(),"                           \
	"   $7, $8, $9, $10, $11, $12" PQRUN_ENQUEUE_KEY PQRUN_ENQUEUE_WEIGHT ")"
static_assert(job_row::EnqueueListIs(INSERT_LIVE), "INSERT_LIVE must list job_row::kColumns' enqueued columns");
#define INSERT_LIVE_RETURNING " RETURNING j.id, j.xmax::text = '0', j.priority, j.status::text"
#define INSERT_LIVE_ARGS                                                                                               \
	14,                                                                                                                \
	{                                                                                                                  \
		TEXTOID, BOOLOID, INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8ARRAYOID, \
		    JSONBOID, TEXTOID, INT4OID                                                                                 \
	}
#define INSERT_LIVE_RUN                                                                                                \
	"INSERT INTO pqrun.job_live AS j (status, delayed, priority, max_attempts, timeout_seconds, run_after,"            \
	"   created_at, updated_at, queue, job_type, dedupe_key, payload)"                                                 \
	" SELECT 'READY', e.run_after > pg_catalog.now(), e.priority, e.max_attempts, e.timeout_seconds, e.run_after,"     \
	"   pg_catalog.now(), pg_catalog.now(), e.queue, e.job_type, e.dedupe_key, e.payload"                              \
	" FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4),"     \
	"   pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8)) WITH ORDINALITY"   \
	"   AS e(priority, max_attempts, timeout_seconds, run_after, queue, job_type, dedupe_key, payload, n)"             \
	" ORDER BY e.n"
/* enqueue_batch's plain elements have no FIFO group, dependencies or keys. */
static_assert(job_row::ListIs(INSERT_LIVE_RUN, "(",
                              job_row::Enqueued() &
                                  ~job_row::Named({"fifo_key", "depends_on", "concurrency_key", "rate_weight"})),
              "INSERT_LIVE_RUN must list every enqueued column of job_row::kColumns it does not leave out");
#define INSERT_LIVE_RUN_RETURNING                                                                                      \
	" RETURNING j.id, j.xmax::text = '0', j.priority, j.status::text, j.queue, j.job_type, j.delayed, j.run_after"
#define INSERT_LIVE_RUN_ARGS                                                                                           \
	8,                                                                                                                 \
	{                                                                                                                  \
		INT4ARRAYOID, INT4ARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID,       \
		    JSONBARRAYOID                                                                                              \
	}
#define ON_DEDUPE_KEY                                                                                                  \
	" ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL DO UPDATE SET updated_at = EXCLUDED.updated_at"

spi::Statement kInsertLive{"insert live", INSERT_LIVE ON_DEDUPE_KEY INSERT_LIVE_RETURNING, INSERT_LIVE_ARGS};

spi::Statement kInsertLiveKeyless{"insert live keyless", INSERT_LIVE INSERT_LIVE_RETURNING, INSERT_LIVE_ARGS};

/* enqueue_batch's plain elements, one row per array position, inserted
 * (and given ids) in element order. */
spi::Statement kInsertLiveRun{"insert live run", INSERT_LIVE_RUN ON_DEDUPE_KEY INSERT_LIVE_RUN_RETURNING,
                              INSERT_LIVE_RUN_ARGS};

#define INSERT_CANCELLED                                                                                               \
	"INSERT INTO pqrun.job_done (id, status, priority, attempts, max_attempts, timeout_seconds, run_after,"         \
	"   finished_at, created_at, updated_at, queue, job_type, dedupe_key, fifo_key, depends_on, last_error, "       \
	"payload" PQRUN_JOB_KEY PQRUN_JOB_WEIGHT ")"                                                                     \
	" VALUES (pg_catalog.nextval('pqrun.job_id_seq'), 'CANCELLED', $1, 0, $2, $3, $4,"                               \
	"   pg_catalog.now(), pg_catalog.now(), pg_catalog.now(), $5, $6, $7, $8, $9, $10, $11" PQRUN_CANCELLED_KEY      \
	    PQRUN_CANCELLED_WEIGHT ")"                                                                                   \
	" RETURNING id"
/* A job cancelled as it is enqueued never ran: no claim, attempt, result
 * or progress. */
static_assert(job_row::ListIs(INSERT_CANCELLED, "(",
                              job_row::InTable(job_row::kDone) &
                                  ~job_row::Named({"locked_at", "locked_by", "lease_token", "duration_ms", "result",
                                                   "progress", "snoozes", "outcome"})),
              "a cancelled enqueue must fill every job_done column of job_row::kColumns it does not leave out");
spi::Statement kInsertCancelled{
    "insert cancelled",
    INSERT_CANCELLED,
    13,
    {INT4OID, INT4OID, INT4OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8ARRAYOID, TEXTOID, JSONBOID,
     TEXTOID, INT4OID}};

/* Locks the unfinished dependencies so none can finish while the dependent
 * is being written, and flags them so finishing them looks for dependents. */
spi::Statement kLockLiveDeps{
    "lock live deps",
    "UPDATE pqrun.job_live SET has_dependents = true WHERE id = ANY ($1) RETURNING id, priority, status::text",
    1,
    {INT8ARRAYOID}};

spi::Statement kFinishedDeps{
    "finished deps", "SELECT id, status::text FROM pqrun.job_done WHERE id = ANY ($1)", 1, {INT8ARRAYOID}};

spi::Statement kInsertEdges{"insert edges",
                            "INSERT INTO pqrun.job_dep (job_id, dep_id) SELECT $1, d FROM pg_catalog.unnest($2) AS d"
                            " ON CONFLICT DO NOTHING",
                            2,
                            {INT8OID, INT8ARRAYOID}};

spi::Statement kLiveByDedupe{"live by dedupe", "SELECT id FROM pqrun.job_live WHERE dedupe_key = $1", 1, {TEXTOID}};

} // namespace stmts

using namespace spi;

namespace {

/* Prefix for error messages about an enqueue_batch element. */
const char *
Where(int element)
{
	return element > 0 ? psprintf("enqueue_batch element %d: ", element) : "";
}

void
Validate(const EnqueueArgs &args, int element)
{
	if (args.isnull[kJobType] || VARSIZE_ANY_EXHDR(DatumGetPointer(args.value[kJobType])) == 0)
		RaiseInvalid("job_type must not be null or empty", element);
	for (EnqueueArg required : {kPayload, kPriority, kMaxAttempts, kQueue})
		if (args.isnull[required]) {
			static const char *const kNames[] = {"job_type",     "payload",         "priority",        "run_after",
			                                     "max_attempts", "timeout_seconds", "dedupe_key",      "queue",
			                                     "depends_on",   "fifo_key",        "concurrency_key", "rate_weight"};
			RaiseInvalid(psprintf("%s must not be null", kNames[required]), element);
		}
	if (VARSIZE_ANY_EXHDR(DatumGetPointer(args.value[kQueue])) == 0)
		RaiseInvalid("queue must not be empty", element);
	/* Every one of them is in an index, whose rows have a size limit. */
	for (EnqueueArg key : {kJobType, kQueue, kDedupeKey, kFifoKey, kConcurrencyKey}) {
		const char *name = key == kJobType     ? "job_type"
		                   : key == kQueue     ? "queue"
		                   : key == kDedupeKey ? "dedupe_key"
		                   : key == kFifoKey   ? "fifo_key"
		                                       : "concurrency_key";
		if (!args.isnull[key] && toast_raw_datum_size(args.value[key]) - VARHDRSZ > kMaxKeyBytes)
			RaiseInvalid(psprintf("%s must be at most %d bytes", name, kMaxKeyBytes), element);
	}
	/* A key's lane starts after '' (pick_lanes.cpp). */
	if (!args.isnull[kConcurrencyKey] && VARSIZE_ANY_EXHDR(DatumGetPointer(args.value[kConcurrencyKey])) == 0)
		RaiseInvalid("concurrency_key must not be empty", element);
	if (!args.isnull[kRateWeight] && (DatumGetInt32(args.value[kRateWeight]) < 1 ||
	                                  DatumGetInt32(args.value[kRateWeight]) > flow_control::kMaxRateWeight))
		RaiseInvalid(psprintf("rate_weight must be between 1 and %d, not %d", flow_control::kMaxRateWeight,
		                      DatumGetInt32(args.value[kRateWeight])),
		             element);
	/* An infinite run_after never falls due, or is overdue by an infinite
	 * age that queue_stats cannot show. */
	if (!args.isnull[kRunAfter] && TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(args.value[kRunAfter])))
		RaiseInvalid("run_after must be finite", element);
	if (DatumGetInt32(args.value[kMaxAttempts]) < 1)
		RaiseInvalid(psprintf("max_attempts must be at least 1, not %d", DatumGetInt32(args.value[kMaxAttempts])),
		             element);
	if (!args.isnull[kTimeoutSeconds] && DatumGetInt32(args.value[kTimeoutSeconds]) <= 0)
		RaiseInvalid(psprintf("timeout_seconds must be positive, not %d", DatumGetInt32(args.value[kTimeoutSeconds])),
		             element);
	Size payload_bytes = toast_raw_datum_size(args.value[kPayload]) - VARHDRSZ;
	if (payload_bytes > static_cast<Size>(pqrun_max_payload_bytes))
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
		                errmsg("%spayload of %zu bytes exceeds pqrun.max_payload_bytes (%d)", Where(element),
		                       payload_bytes, pqrun_max_payload_bytes)));
}

/* DependencyIds answers the distinct ids of depends_on (NULL elements are
 * rejected); *count is 0 when there are none. */
int64 *
DependencyIds(const EnqueueArgs &args, int element, int *count)
{
	*count = 0;
	if (args.isnull[kDependsOn])
		return nullptr;
	ArrayType *array = DatumGetArrayTypeP(args.value[kDependsOn]);
	Datum *elems;
	bool *elem_nulls;
	int n;
	deconstruct_array(array, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &elem_nulls, &n);
	int64 *ids = static_cast<int64 *>(palloc(sizeof(int64) * (n + 1)));
	for (int i = 0; i < n; i++) {
		if (elem_nulls[i])
			RaiseInvalid("depends_on must not contain nulls", element);
		int64 id = DatumGetInt64(elems[i]);
		bool seen = false;
		for (int j = 0; j < *count && !seen; j++)
			seen = ids[j] == id;
		if (!seen)
			ids[(*count)++] = id;
	}
	return ids;
}

/* Elements per run: large enough to amortise a set-based INSERT, small
 * enough that its parameter arrays stay a few hundred kB. */
constexpr int kRunCapacity = 1000;
/* Slots of the open-addressing set of dedupe-key hashes (power of two,
 * at least twice kRunCapacity). */
constexpr uint32 kKeySlots = 2048;

/* A run of plain elements waiting for their INSERT. */
struct PlainRun {
	EnqueueArgs args[kRunCapacity];
	int count;
	/* Hashes (|1, so 0 means empty) of the run's dedupe keys: one INSERT ...
	 * ON CONFLICT may not meet the same key twice, so a repeated key (or a
	 * hash collision, harmlessly) closes the run first. */
	uint32 keys[kKeySlots];
};

bool
AddKey(PlainRun *run, Datum dedupe_key)
{
	text *key = DatumGetTextPP(dedupe_key);
	uint32 hash = hash_bytes(reinterpret_cast<const unsigned char *>(VARDATA_ANY(key)), VARSIZE_ANY_EXHDR(key)) | 1;
	for (uint32 slot = hash & (kKeySlots - 1);; slot = (slot + 1) & (kKeySlots - 1)) {
		if (run->keys[slot] == hash)
			return false;
		if (run->keys[slot] == 0) {
			run->keys[slot] = hash;
			return true;
		}
	}
}

Datum
ArrayOf(const PlainRun &run, EnqueueArg arg, Oid type, int16 typlen, bool byval, char align)
{
	Datum *values = static_cast<Datum *>(palloc(sizeof(Datum) * run.count));
	bool *nulls = static_cast<bool *>(palloc(sizeof(bool) * run.count));
	for (int i = 0; i < run.count; i++) {
		values[i] = run.args[i].value[arg];
		nulls[i] = run.args[i].isnull[arg];
	}
	int dims[1] = {run.count};
	int lbs[1] = {1};
	return PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, type, typlen, byval, align));
}

/* CopyArgs copies the by-reference arguments into the current context. */
void
CopyArgs(EnqueueArgs *args)
{
	for (EnqueueArg arg : {kJobType, kPayload, kDedupeKey, kQueue, kDependsOn, kFifoKey, kConcurrencyKey})
		if (!args->isnull[arg])
			args->value[arg] = datumCopy(args->value[arg], false, -1);
}

/* NoteNew counts a new job that is not blocked and notes it for the wake-up
 * at commit. */
void
NoteNew(const char *queue, const char *job_type, int32 priority, int64 id, bool delayed, TimestampTz run_after)
{
	stats::Enqueued(queue, job_type);
	if (delayed)
		next_due::NoteDelayed(run_after);
	else
		wake::NoteReady(queue, job_type, pick_hint::KeyOf(priority, id));
}

/* InsertDirect writes plain keyless jobs below the executor
 * (enqueue_direct.hpp), storing their ids in `ids`; false when the SQL path
 * must. */
bool
InsertDirect(const EnqueueArgs *jobs, int count, int64 *ids)
{
	if (!enqueue_direct::Insert(jobs, count, ids))
		return false;
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	for (int i = 0; i < count; i++) {
		const EnqueueArgs &args = jobs[i];
		TimestampTz run_after = RunAfter(args);
		NoteNew(TextDatumGetCString(args.value[kQueue]), TextDatumGetCString(args.value[kJobType]),
		        DatumGetInt32(args.value[kPriority]), ids[i], run_after > now, run_after);
	}
	return true;
}

/* InsertRunBySql inserts the run's jobs in one statement and stores their
 * ids (or their dedupe holders' ids) in `ids`, in element order. */
void
InsertRunBySql(const PlainRun &run, int64 *ids)
{
	Datum values[8] = {ArrayOf(run, kPriority, INT4OID, 4, true, TYPALIGN_INT),
	                   ArrayOf(run, kMaxAttempts, INT4OID, 4, true, TYPALIGN_INT),
	                   ArrayOf(run, kTimeoutSeconds, INT4OID, 4, true, TYPALIGN_INT),
	                   ArrayOf(run, kRunAfter, TIMESTAMPTZOID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE),
	                   ArrayOf(run, kQueue, TEXTOID, -1, false, TYPALIGN_INT),
	                   ArrayOf(run, kJobType, TEXTOID, -1, false, TYPALIGN_INT),
	                   ArrayOf(run, kDedupeKey, TEXTOID, -1, false, TYPALIGN_INT),
	                   ArrayOf(run, kPayload, JSONBOID, -1, false, TYPALIGN_INT)};
	uint64 n = Exec(stmts::kInsertLiveRun, values, nullptr, SPI_OK_INSERT_RETURNING);
	if (n != static_cast<uint64>(run.count))
		elog(ERROR, "pqrun: enqueue_batch wrote %llu rows for %d elements", (unsigned long long)n, run.count);
	for (uint64 i = 0; i < n; i++) {
		bool isnull;
		ids[i] = ColInt64(i, 1);
		int32 priority = DatumGetInt32(Col(i, 3, &isnull));
		if (ColBool(i, 2))
			NoteNew(ColText(i, 5), ColText(i, 6), priority, ids[i], ColBool(i, 7),
			        DatumGetTimestampTz(Col(i, 8, &isnull)));
		else if (ParseStatus(ColText(i, 4)) == JobStatus::kReady)
			pick_hint::NoteHeld(pick_hint::KeyOf(priority, ids[i])); /* the dedupe hit locked the holder */
	}
	spi::ForgetLastResult();
}

/* WriteRun inserts the run's jobs, directly when none has a dedupe key, and
 * appends their ids (or their dedupe holders' ids) to `out`, in element
 * order. */
void
WriteRun(PlainRun *run, Tuplestorestate *out, TupleDesc out_desc)
{
	if (run->count == 0)
		return;
	bool keyless = true;
	for (int i = 0; i < run->count && keyless; i++)
		keyless = run->args[i].isnull[kDedupeKey];
	auto *ids = static_cast<int64 *>(palloc(sizeof(int64) * run->count));
	if (!keyless || !InsertDirect(run->args, run->count, ids))
		InsertRunBySql(*run, ids);
	for (int i = 0; i < run->count; i++) {
		Datum id = Int64GetDatum(ids[i]);
		bool isnull = false;
		tuplestore_putvalues(out, out_desc, &id, &isnull);
	}
	run->count = 0;
	memset(run->keys, 0, sizeof(run->keys));
}

/* NoteKeyedQueues marks each of `queues` keyed (flow_control::NoteKeyed),
 * once each, in the order of their names. */
void
NoteKeyedQueues(char **queues, int n)
{
	std::sort(queues, queues + n, [](const char *a, const char *b) { return strcmp(a, b) < 0; });
	for (int i = 0; i < n; i++) {
		if (i > 0 && strcmp(queues[i], queues[i - 1]) == 0)
			continue;
		citus::EnterQueue(queues[i]);
		flow_control::NoteKeyed(CStringGetTextDatum(queues[i]));
	}
}

} // namespace

TimestampTz
RunAfter(const EnqueueArgs &args)
{
	return args.isnull[kRunAfter] ? GetCurrentTransactionStartTimestamp() : DatumGetTimestampTz(args.value[kRunAfter]);
}

void
SetEnqueueDefaults(EnqueueArgs *args)
{
	for (int i = 0; i < kEnqueueArgCount; i++) {
		args->value[i] = Datum(0);
		args->isnull[i] = true;
	}
	args->value[kPayload] = DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"));
	args->value[kPriority] = Int32GetDatum(0);
	args->value[kRunAfter] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	args->value[kMaxAttempts] = Int32GetDatum(5);
	args->value[kQueue] = CStringGetTextDatum(kDefaultQueue);
	for (EnqueueArg set : {kPayload, kPriority, kRunAfter, kMaxAttempts, kQueue})
		args->isnull[set] = false;
}

int64
Enqueue(const EnqueueArgs &args, int element)
{
	Validate(args, element);
	if (citus::JobTablesDistributed())
		citus::EnterQueue(TextDatumGetCString(args.value[kQueue]));
	if (!args.isnull[kDependsOn] && citus::InShards())
		ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
		                errmsg("%son Citus, a job cannot depend on other jobs", Where(element)),
		                errdetail("Its dependencies may be in other shards, on other nodes (README, \"Running on "
		                          "Citus\").")));
	TimestampTz now = GetCurrentTransactionStartTimestamp();
	TimestampTz run_after = RunAfter(args);
	/* Before the dependencies' rows and the group lock, as enqueue_batch
	 * takes all of its marks before any of those. */
	if (!args.isnull[kConcurrencyKey])
		flow_control::NoteKeyed(args.value[kQueue]);

	if (args.isnull[kDedupeKey] && args.isnull[kDependsOn] && args.isnull[kFifoKey]) {
		int64 id;
		if (InsertDirect(&args, 1, &id))
			return id;
	}

	/* Dependencies: unfinished ones are locked and become edges; finished
	 * ones are met (DONE) or doom the job (FAILED/CANCELLED). */
	int dep_count;
	int64 *dep_ids = DependencyIds(args, element, &dep_count);
	int64 *pending = nullptr;
	int pending_count = 0;
	char *cancel_reason = nullptr;
	if (dep_count > 0) {
		Datum dep_values[1] = {Int8Array(dep_ids, dep_count)};
		uint64 nlive = Exec(stmts::kLockLiveDeps, dep_values, nullptr, SPI_OK_UPDATE_RETURNING);
		for (uint64 i = 0; i < nlive; i++) {
			bool isnull;
			if (ParseStatus(ColText(i, 3)) == JobStatus::kReady)
				pick_hint::NoteHeld(pick_hint::KeyOf(DatumGetInt32(Col(i, 2, &isnull)), ColInt64(i, 1)));
		}
		IdList live = CopyIds(nlive, false);
		pending = live.ids;
		pending_count = static_cast<int>(live.count);
		if (live.count < static_cast<uint64>(dep_count)) {
			IdList finished = CopyIds(Exec(stmts::kFinishedDeps, dep_values, nullptr, SPI_OK_SELECT), true);
			for (int i = 0; i < dep_count; i++) {
				bool found = false;
				for (uint64 j = 0; j < live.count && !found; j++)
					found = live.ids[j] == dep_ids[i];
				for (uint64 j = 0; j < finished.count && !found; j++) {
					if (finished.ids[j] != dep_ids[i])
						continue;
					found = true;
					JobStatus ended = ParseStatus(finished.labels[j]);
					if (ended != JobStatus::kDone && cancel_reason == nullptr)
						cancel_reason = psprintf("dependency %lld ended %s", (long long)dep_ids[i], StatusName(ended));
				}
				if (!found)
					RaiseInvalid(psprintf("depends_on references unknown job %lld", (long long)dep_ids[i]), element);
			}
		}
	}

	char nulls[kEnqueueArgCount + 3];
	memset(nulls, ' ', sizeof(nulls));
	if (cancel_reason != nullptr) {
		/* A job doomed at birth still defers to an unfinished job holding its
		 * dedupe key. */
		if (!args.isnull[kDedupeKey]) {
			Datum key[1] = {args.value[kDedupeKey]};
			if (Exec(stmts::kLiveByDedupe, key, nullptr, SPI_OK_SELECT) > 0)
				return ColInt64(0, 1);
		}
		Datum values[13] = {args.value[kPriority],       args.value[kMaxAttempts],
		                    args.value[kTimeoutSeconds], TimestampTzGetDatum(run_after),
		                    args.value[kQueue],          args.value[kJobType],
		                    args.value[kDedupeKey],      args.value[kFifoKey],
		                    args.value[kDependsOn],      CStringGetTextDatum(cancel_reason),
		                    args.value[kPayload],        args.value[kConcurrencyKey],
		                    args.value[kRateWeight]};
		nulls[2] = args.isnull[kTimeoutSeconds] ? 'n' : ' ';
		nulls[6] = args.isnull[kDedupeKey] ? 'n' : ' ';
		nulls[7] = args.isnull[kFifoKey] ? 'n' : ' ';
		nulls[8] = args.isnull[kDependsOn] ? 'n' : ' ';
		nulls[11] = args.isnull[kConcurrencyKey] ? 'n' : ' ';
		nulls[12] = args.isnull[kRateWeight] ? 'n' : ' ';
		nulls[13] = '\0';
		Exec(stmts::kInsertCancelled, values, nulls, SPI_OK_INSERT_RETURNING);
		const char *queue = TextDatumGetCString(args.value[kQueue]);
		const char *job_type = TextDatumGetCString(args.value[kJobType]);
		stats::Enqueued(queue, job_type);
		stats::JobFinished(queue, job_type, stats::Finished::kCancelled, 0);
		return ColInt64(0, 1);
	}

	bool blocked = pending_count > 0;
	if (!args.isnull[kFifoKey]) {
		/* After the dependencies' rows: finishing one of them takes its
		 * dependents' group locks after its row (queue.cpp). */
		LockFifoGroup(TextDatumGetCString(args.value[kFifoKey]));
		Datum key[1] = {args.value[kFifoKey]};
		if (Exec(stmts::kFifoBusy, key, nullptr, SPI_OK_SELECT, 1) > 0)
			blocked = true;
	}

	Datum values[14] = {CStringGetTextDatum(StatusName(blocked ? JobStatus::kBlocked : JobStatus::kReady)),
	                    BoolGetDatum(!blocked && run_after > now),
	                    args.value[kPriority],
	                    args.value[kMaxAttempts],
	                    args.value[kTimeoutSeconds],
	                    TimestampTzGetDatum(run_after),
	                    args.value[kQueue],
	                    args.value[kJobType],
	                    args.value[kDedupeKey],
	                    args.value[kFifoKey],
	                    args.value[kDependsOn],
	                    args.value[kPayload],
	                    args.value[kConcurrencyKey],
	                    args.value[kRateWeight]};
	nulls[4] = args.isnull[kTimeoutSeconds] ? 'n' : ' ';
	nulls[8] = args.isnull[kDedupeKey] ? 'n' : ' ';
	nulls[9] = args.isnull[kFifoKey] ? 'n' : ' ';
	nulls[10] = args.isnull[kDependsOn] ? 'n' : ' ';
	nulls[12] = args.isnull[kConcurrencyKey] ? 'n' : ' ';
	nulls[13] = args.isnull[kRateWeight] ? 'n' : ' ';
	nulls[14] = '\0';
	Exec(args.isnull[kDedupeKey] ? stmts::kInsertLiveKeyless : stmts::kInsertLive, values, nulls,
	     SPI_OK_INSERT_RETURNING);
	int64 id = ColInt64(0, 1);
	bool inserted = ColBool(0, 2);
	bool isnull;
	int32 priority = DatumGetInt32(Col(0, 3, &isnull)); /* a dedupe hit answers the holder's */
	const char *queue = TextDatumGetCString(args.value[kQueue]);
	const char *job_type = TextDatumGetCString(args.value[kJobType]);
	if (inserted && blocked)
		stats::Enqueued(queue, job_type);
	else if (inserted)
		NoteNew(queue, job_type, priority, id, run_after > now, run_after);
	else if (ParseStatus(ColText(0, 4)) == JobStatus::kReady)
		pick_hint::NoteHeld(pick_hint::KeyOf(priority, id)); /* the dedupe hit locked the holder */
	if (inserted && pending_count > 0) {
		Datum edge_values[2] = {Int64GetDatum(id), Int8Array(pending, pending_count)};
		Exec(stmts::kInsertEdges, edge_values, nullptr, SPI_OK_INSERT);
	}
	return id;
}

void
EnqueueBatch(Jsonb *jobs, Tuplestorestate *out, TupleDesc out_desc)
{
	batch::JobCursor cursor;
	batch::Begin(jobs, &cursor);
	batch::LockKeys keys = batch::LockKeysOf(jobs);
	/* The keyed marks first, as Enqueue takes a job's before its group
	 * lock, and in the order of their queues: a call that took them as its
	 * elements came, after its group locks or between them, deadlocked
	 * with one that took the same the other way round. */
	NoteKeyedQueues(keys.keyed_queues, keys.nkeyed);
	if (keys.nfifo > 1 && !keys.has_dependencies)
		LockFifoGroups(keys.fifo_keys, keys.nfifo);
	auto *run = static_cast<PlainRun *>(palloc0(sizeof(PlainRun)));
	/* A run's arguments (and its statement's garbage) live in one of two
	 * contexts until its INSERT; the element that closes a run moves to the
	 * other one, so the whole finished run can be dropped at once. */
	MemoryContext contexts[2];
	for (MemoryContext &context : contexts)
		context = AllocSetContextCreate(CurrentMemoryContext, "pqrun enqueue_batch run", ALLOCSET_DEFAULT_SIZES);
	int current = 0;
	MemoryContext batch_context = MemoryContextSwitchTo(contexts[current]);
	EnqueueArgs args;
	while (batch::Next(&cursor, &args)) {
		/* A keyed or weighted job's run would lose its key or weight on the
		 * SQL path (INSERT_LIVE_RUN). */
		bool plain = args.isnull[kDependsOn] && args.isnull[kFifoKey] && args.isnull[kConcurrencyKey] &&
		             args.isnull[kRateWeight];
		if (plain) {
			Validate(args, cursor.element); /* Enqueue validates the others */
			if (citus::JobTablesDistributed())
				citus::EnterQueue(TextDatumGetCString(args.value[kQueue]));
		}
		bool has_key = !args.isnull[kDedupeKey];
		if (plain && run->count < kRunCapacity && (!has_key || AddKey(run, args.value[kDedupeKey]))) {
			run->args[run->count++] = args;
			continue;
		}
		WriteRun(run, out, out_desc);
		if (plain) {
			current = 1 - current;
			MemoryContextSwitchTo(contexts[current]);
			CopyArgs(&args);
			MemoryContextReset(contexts[1 - current]);
			if (has_key)
				AddKey(run, args.value[kDedupeKey]);
			run->args[run->count++] = args;
			continue;
		}
		Datum id = Int64GetDatum(Enqueue(args, cursor.element));
		bool isnull = false;
		tuplestore_putvalues(out, out_desc, &id, &isnull);
		spi::ForgetLastResult();
		MemoryContextReset(contexts[current]);
	}
	WriteRun(run, out, out_desc);
	MemoryContextSwitchTo(batch_context);
	for (MemoryContext context : contexts)
		MemoryContextDelete(context);
}

} // namespace pqrun::jobs
