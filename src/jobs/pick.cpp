/* src/jobs/pick.cpp — claiming jobs: pickup, its long poll, and await_jobs.
 *
 * A pickup claims in pickup-key order (-priority, id) from the pickup hint
 * on (pick_hint.hpp), then due delayed jobs nobody promoted yet. A pickup only
 * locks the jobs it hands out (below the executor when pick_direct.hpp
 * can) and leaves writing the claims to deferred_claims.cpp. A pickup that
 * may wait registers as a waiter first, looks in subtransactions rolled
 * back when empty, and sleeps on its latch until a commit, a due time or
 * its deadline; await_jobs does the same without claiming and without
 * holding a snapshot.
 */
#include "guc.hpp"
#include "jobs/flow_control.hpp"
#include "jobs/job_row.hpp"
#include "jobs/pick_direct.hpp"
#include "jobs/pick_lanes.hpp"
#include "jobs/pick_sql.hpp"
#include "jobs/queue.hpp"
#include "jobs/queue_internal.hpp"
#include "pg/citus.hpp"
#include "pg/boundary.hpp"
#include "pg/client_wait.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"
#include "shmem/stats.hpp"
#include "xact/deferred_claims.hpp"
#include "xact/pickup_commit.hpp"
#include "xact/next_due.hpp"
#include "xact/wake.hpp"

namespace pqrun::jobs {

namespace stmts {

/* Claim the rows `candidates` selects for worker $1 at time `at`. The
 * claimed ids go through an array rather than a join so that the (generic)
 * plan updates them by primary key. */
#define CLAIM(candidates, at)                                                                                          \
	"WITH claimed AS ("                                                                                                \
	"  UPDATE pqrun.job_live j"                                                                                        \
	"     SET status = 'RUNNING', delayed = false, attempts = j.attempts + 1,"                                         \
	"         locked_at = " at ", locked_by = $1,"                                                                     \
	"         lease_token = " PQRUN_LEASE_TOKEN ", heartbeat_at = NULL,"                                               \
	"         " PQRUN_SET_HOLDER(PQRUN_HELD_BY_SETTING) "updated_at = " at                                          \
	"   WHERE j.id = ANY (ARRAY(" candidates "))"                                                                      \
	"  RETURNING j.*)"                                                                                                 \
	" SELECT " LIVE_AS_JOB " FROM claimed ORDER BY priority DESC, id"

static_assert(job_row::ClaimSets(CLAIM("", "$7"), " WHERE"), "CLAIM must set what job_row::kColumns says");

/* Jobs of queues $8 and of (queue, job_type) pairs $9 (flow_control.hpp's
 * BlockedQueues and BlockedPairs; NULL: none) are not claimed. */
#define NOT_BLOCKED " AND ($8::text[] IS NULL OR queue <> ALL ($8))" PQRUN_NOT_BLOCKED_PAIR("$9")

/* Claim up to $2 runnable jobs for worker $1 at time $7, optionally filtered
 * by job types $3 and queues $4, starting at pickup key ($5, $6) =
 * (-priority, id), none of a blocked queue or pair. The partial index
 * job_live_pick yields rows already in priority/id order, so the claim
 * touches only the rows it returns plus the ones other pickers hold. */
#define PICK(filter)                                                                                                   \
	CLAIM("SELECT id FROM pqrun.job_live"                                                                              \
	      " WHERE status = 'READY' AND NOT delayed" PQRUN_UNKEYED                                                      \
	      " AND ((-(priority::bigint)), id) >= ($5, $6) " filter NOT_BLOCKED " ORDER BY (-(priority::bigint)), id"     \
	      " LIMIT $2 FOR UPDATE SKIP LOCKED",                                                                          \
	      "$7")

/* Arguments of PICK and LOCK_PICK: worker, batch size, job types, queues,
 * the pickup hint's key, the claim time, blocked queues and pairs. */
// clang-format off
#define PICK_ARGS 9, {TEXTOID, INT4OID, TEXTARRAYOID, TEXTARRAYOID, INT8OID, INT8OID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID}
// clang-format on

#define LOCK_PICK(filter)                                                                                              \
	"SELECT " LOCKED_AS_JOB ", ctid"                                                                                   \
	" FROM pqrun.job_live"                                                                                             \
	" WHERE status = 'READY' AND NOT delayed" PQRUN_UNKEYED                                                            \
	" AND ((-(priority::bigint)), id) >= ($5, $6) " filter NOT_BLOCKED " ORDER BY (-(priority::bigint)), id"           \
	" LIMIT $2 FOR UPDATE SKIP LOCKED"

spi::Statement kPromoteDue{
    "promote due",
    "UPDATE pqrun.job_live j SET delayed = false"
    " WHERE j.id = ANY (ARRAY(SELECT id FROM pqrun.job_live WHERE delayed AND run_after <= $1"
    "   AND ($2::text[] IS NULL OR job_type = ANY ($2)) AND ($3::text[] IS NULL OR queue = ANY ($3))"
    "   ORDER BY run_after LIMIT $4 FOR UPDATE SKIP LOCKED))"
    " RETURNING j.queue, j.job_type, j.priority, j.id",
    4,
    {TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID, INT4OID}};

/* A job without a key that a pickup could claim now ($3: the clock): one
 * arm under job_live_pick's condition, one under job_live_delayed's, so
 * that neither reads the keyed jobs (as one condition with an OR, it read
 * all of job_live). */
#define READY_EXISTS(which)                                                                                            \
	"EXISTS (SELECT 1 FROM pqrun.job_live WHERE " which PQRUN_UNKEYED                                                  \
	"   AND ($1::text[] IS NULL OR job_type = ANY ($1)) AND ($2::text[] IS NULL OR queue = ANY ($2))"                  \
	"   AND ($4::text[] IS NULL OR queue <> ALL ($4))" PQRUN_NOT_BLOCKED_PAIR("$5") ")"
spi::Statement kReadyExists{
    "ready exists",
    "SELECT " READY_EXISTS("status = 'READY' AND NOT delayed") " OR " READY_EXISTS("delayed AND run_after <= $3"),
    5,
    {TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID}};
/* The second arm alone, where the filter lanes answer the first
 * (pick_direct::AnyReady). */
spi::Statement kDueExists{"due exists",
                          "SELECT " READY_EXISTS("delayed AND run_after <= $3"),
                          5,
                          {TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, TEXTARRAYOID, TEXTARRAYOID}};
#undef READY_EXISTS

spi::Statement kNextDelayed{
    "next delayed", "SELECT pg_catalog.min(run_after) FROM pqrun.job_live WHERE delayed", 0, {}};

spi::Statement kPick{"pick", PICK(""), PICK_ARGS};

spi::Statement kPickTypes{"pick by type", PICK("AND job_type = ANY ($3)"), PICK_ARGS};

spi::Statement kPickQueues{"pick by queue", PICK("AND queue = ANY ($4)"), PICK_ARGS};

spi::Statement kPickTypesQueues{"pick by type and queue", PICK("AND job_type = ANY ($3) AND queue = ANY ($4)"),
                                PICK_ARGS};

/* Delayed jobs that fell due and no maintenance round has promoted yet
 * ($5: the clock), claimed directly when no promoted job is left; none of
 * the queues $6 (those with a control, which only a locking pick can
 * enforce: they wait for their promotion) and none with a key (which
 * wait for their promotion into their lane). */
spi::Statement kPickDue{
    "pick due",
    CLAIM("SELECT id FROM pqrun.job_live"
          " WHERE delayed AND run_after <= $5" PQRUN_UNKEYED
          "   AND ($3::text[] IS NULL OR job_type = ANY ($3)) AND ($4::text[] IS NULL OR queue = ANY ($4))"
          "   AND ($6::text[] IS NULL OR queue <> ALL ($6))"
          " ORDER BY run_after LIMIT $2 FOR UPDATE SKIP LOCKED",
          "$5"),
    6,
    {TEXTOID, INT4OID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, TEXTARRAYOID}};

/* A batch pickup whose claims are deferred (deferred_claims.hpp): the
 * same rows as PICK, locked but not written, as pqrun.jobs rows the
 * claim will make of them, followed by where each row is. Run when
 * pick_direct.hpp declines, which makes the same rows. */
spi::Statement kLockPick{"lock pick", LOCK_PICK(""), PICK_ARGS};

spi::Statement kLockPickTypes{"lock pick by type", LOCK_PICK("AND job_type = ANY ($3)"), PICK_ARGS};

spi::Statement kLockPickQueues{"lock pick by queue", LOCK_PICK("AND queue = ANY ($4)"), PICK_ARGS};

spi::Statement kLockPickTypesQueues{"lock pick by type and queue",
                                    LOCK_PICK("AND job_type = ANY ($3) AND queue = ANY ($4)"), PICK_ARGS};

/* The pick for a filter: [locking][by job type][by queue]. */
spi::Statement *const kPicks[2][2][2] = {{{&kPick, &kPickQueues}, {&kPickTypes, &kPickTypesQueues}},
                                         {{&kLockPick, &kLockPickQueues}, {&kLockPickTypes, &kLockPickTypesQueues}}};

} // namespace stmts

using namespace spi;

namespace {

/* The wait event of a waiting pickup (compat::ExtensionWaitEvent). */
uint32 long_poll_wait_event = 0;

/* ClaimReceiver takes a pick statement's rows (pqrun.jobs rows, and the
 * row's ctid after them for a locking pick) straight from the executor into
 * the pickup's result, noting each claim on the way. */
struct ClaimReceiver {
	DestReceiver pub; /* first: the executor sees only this */
	Tuplestorestate *out;
	TupleDesc out_desc;
	Claims *locked;          /* the claims gathered, when given */
	int capacity;            /* room in `locked` */
	pick_hint::PickKey last; /* pickup key of the last row */
	bool gated;              /* controls apply: each claim takes its places (flow_control.hpp) */
};

/* Grow doubles the room in `c` from `capacity` entries. */
void
Grow(Claims *c, int *capacity)
{
	int more = *capacity > INT_MAX / 4 ? INT_MAX / 2 : *capacity * 2;
	c->ids = static_cast<int64 *>(repalloc(c->ids, sizeof(int64) * more));
	c->tokens = static_cast<pg_uuid_t *>(repalloc(c->tokens, sizeof(pg_uuid_t) * more));
	c->in_fifo = static_cast<bool *>(repalloc(c->in_fifo, sizeof(bool) * more));
	c->ctids = static_cast<ItemPointerData *>(repalloc(c->ctids, sizeof(ItemPointerData) * more));
	*capacity = more;
}

/* ReceiveClaim hands out a claimed row, or answers false for a locked row
 * whose limit is full: that row stays locked, READY, until the transaction
 * ends. */
bool
ReceiveClaim(ClaimReceiver *r, const Datum *values, const bool *nulls)
{
	/* Columns of job_row.hpp; qualified, since queue.hpp has names of its own. */
	int64 id = DatumGetInt64(values[job_row::kId]);
	pick_hint::PickKey key = pick_hint::KeyOf(DatumGetInt32(values[job_row::kPriority]), id);
	bool keyed = !nulls[job_row::kConcurrencyKey];
	bool weighted = !nulls[job_row::kRateWeight];
	if (r->gated && !flow_control::Reserve(values[job_row::kQueue], values[job_row::kJobType],
	                                       keyed ? values[job_row::kConcurrencyKey] : Datum(0),
	                                       weighted ? DatumGetInt32(values[job_row::kRateWeight]) : 1, id,
	                                       DatumGetUUIDP(values[job_row::kLeaseToken]))) {
		/* Only a locking pick may meet a full limit (the others pass over
		 * every queue with a control). */
		if (r->locked == nullptr)
			elog(ERROR, "pqrun: job %lld was claimed past its queue's controls", static_cast<long long>(id));
		pick_hint::NoteHeld(key);
		return false;
	}
	tuplestore_putvalues(r->out, r->out_desc, const_cast<Datum *>(values), const_cast<bool *>(nulls));
	const char *queue = TextDatumGetCString(values[job_row::kQueue]);
	const char *job_type = TextDatumGetCString(values[job_row::kJobType]);
	r->last = key;
	wake::NoteClaimed(r->last, queue, job_type);
	stats::PickedUp(
	    queue, job_type,
	    (DatumGetTimestampTz(values[job_row::kLockedAt]) - DatumGetTimestampTz(values[job_row::kRunAfter])) / 1000);
	if (Claims *locked = r->locked) {
		if (locked->count == r->capacity)
			Grow(locked, &r->capacity);
		int i = locked->count++;
		locked->ids[i] = DatumGetInt64(values[job_row::kId]);
		locked->tokens[i] = *DatumGetUUIDP(values[job_row::kLeaseToken]);
		locked->in_fifo[i] = !nulls[job_row::kFifoKey];
		locked->ctids[i] = *reinterpret_cast<ItemPointer>(DatumGetPointer(values[r->out_desc->natts]));
	}
	return true;
}

} // namespace
} // namespace pqrun::jobs

extern "C" {

static bool
pqrun_claim_receive(TupleTableSlot *slot, DestReceiver *self)
{
	auto *receiver = reinterpret_cast<pqrun::jobs::ClaimReceiver *>(self);
	pqrun::GuardedEntry([&]() {
		slot_getallattrs(slot);
		(void)pqrun::jobs::ReceiveClaim(receiver, slot->tts_values, slot->tts_isnull);
	});
	return true;
}

static void
pqrun_claim_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
pqrun_claim_shutdown(DestReceiver *self)
{
}
}

namespace pqrun::jobs {
namespace {

/* An array argument: its value and whether it is NULL. */
Datum
ArrayArg(const ArrayType *array)
{
	return PointerGetDatum(array);
}
char
NullIf(bool null)
{
	return null ? 'n' : ' ';
}

/* What a pick statement (PICK, LOCK_PICK, PICK_ARGS) and the direct pick
 * and lanes are asked, by name. */
struct PickArgs {
	Datum worker; /* text */
	int32 batch_size;
	PickFilter filter;
	pick_hint::PickKey start;
	TimestampTz at;       /* the claims' time */
	Datum blocked_queues; /* flow_control::BlockedQueues, Datum(0): none */
	Datum blocked_pairs;  /* flow_control::BlockedPairs, Datum(0): none */

	/* SetBlocked names the blocked queues and pairs of the look: none
	 * unless `gated`. */
	void SetBlocked(bool gated)
	{
		blocked_queues = gated ? flow_control::BlockedQueues() : Datum(0);
		blocked_pairs = gated ? flow_control::BlockedPairs() : Datum(0);
	}

	/* Bind sets a pick statement's parameters $1 to $9. */
	void Bind(Datum values[9], char nulls[10]) const
	{
		const Datum v[9] = {worker,
		                    Int32GetDatum(batch_size),
		                    ArrayArg(filter.job_types),
		                    ArrayArg(filter.queues),
		                    Int64GetDatum(start.neg_priority),
		                    Int64GetDatum(start.id),
		                    TimestampTzGetDatum(at),
		                    blocked_queues,
		                    blocked_pairs};
		const char n[10] = {' ', ' ', NullIf(filter.job_types == nullptr), NullIf(filter.queues == nullptr),  ' ',
		                    ' ', ' ', NullIf(blocked_queues == Datum(0)),  NullIf(blocked_pairs == Datum(0)), '\0'};
		memcpy(values, v, sizeof(v));
		memcpy(nulls, n, sizeof(n));
	}
};

/* PickStatement answers the pick for `filter`, a locking one when
 * `locking`. */
spi::Statement &
PickStatement(const PickFilter &filter, bool locking)
{
	return *stmts::kPicks[locking][filter.job_types != nullptr][filter.queues != nullptr];
}

/* StartClaims readies `receiver` to take a pick's rows into `out`,
 * gathering them into `locked` when given (room for them grows with them:
 * a batch size says how many at most, not how many there are). When
 * `gated`, each claim takes its places in its limits first. */
void
StartClaims(ClaimReceiver *receiver, Tuplestorestate *out, TupleDesc out_desc, Claims *locked, bool gated)
{
	int capacity = 16;
	if (locked) {
		locked->ids = static_cast<int64 *>(palloc(sizeof(int64) * capacity));
		locked->tokens = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t) * capacity));
		locked->in_fifo = static_cast<bool *>(palloc(sizeof(bool) * capacity));
		locked->ctids = static_cast<ItemPointerData *>(palloc(sizeof(ItemPointerData) * capacity));
		locked->count = 0;
	}
	*receiver = ClaimReceiver{};
	receiver->pub.receiveSlot = pqrun_claim_receive;
	receiver->pub.rStartup = pqrun_claim_startup;
	receiver->pub.rShutdown = pqrun_claim_shutdown;
	receiver->pub.rDestroy = pqrun_claim_shutdown;
	receiver->pub.mydest = DestTuplestore; /* not DestNone, for which SPI discards the rows */
	receiver->out = out;
	receiver->out_desc = out_desc;
	receiver->locked = locked;
	receiver->capacity = capacity;
	receiver->gated = gated;
}

/* PickInto runs the pick `stmt` into `receiver` and answers how many it
 * claimed and, in `last` when given, the pickup key of the last one. A
 * locking pick is made by pick_direct.hpp unless it declines. */
uint64
PickInto(spi::Statement &stmt, const PickArgs &args, ClaimReceiver *receiver, pick_hint::PickKey *last)
{
	Claims *locked = receiver->locked;
	int before = locked ? locked->count : 0;
	receiver->last = pick_hint::PickKey{INT64_MAX, INT64_MAX};
	uint64 n = 0;
	bool direct = false;
	if (locked) {
		pick_direct::Request request{args.worker, args.batch_size, args.filter, args.start, args.at, receiver->gated};
		direct = pick_direct::Pick(
		    request, receiver->out_desc,
		    [](void *r, const Datum *row, const bool *row_nulls) {
			    return ReceiveClaim(static_cast<ClaimReceiver *>(r), row, row_nulls);
		    },
		    receiver, &n);
	}
	if (!direct) {
		Datum values[9];
		char nulls[10];
		args.Bind(values, nulls);
		n = ExecInto(stmt, values, nulls, &receiver->pub);
	}
	if (direct && static_cast<uint64>(locked->count - before) != n)
		elog(ERROR, "pqrun: pickup locked %llu jobs but received %d", (unsigned long long)n, locked->count - before);
	/* A locking statement's rows include those a full limit turned away. */
	if (locked)
		n = locked->count - before;
	if (last)
		*last = receiver->last;
	return n;
}

/* PickLanes claims up to `want` jobs with concurrency keys of `args`
 * into `receiver` (a locking pick's). */
uint64
PickLanes(const PickArgs &args, int32 want, ClaimReceiver *receiver)
{
	pick_lanes::Request request{args.worker, want, args.filter, args.blocked_pairs, args.at, receiver->gated};
	pick_lanes::Receiver to{&receiver->pub,
	                        [](void *r, const Datum *row, const bool *row_nulls) {
		                        return ReceiveClaim(static_cast<ClaimReceiver *>(r), row, row_nulls);
	                        },
	                        receiver,
	                        receiver->out_desc,
	                        &receiver->locked->ids,
	                        &receiver->locked->count};
	return pick_lanes::Pick(request, to);
}

/* A filtered pickup's own hint (the database's is raised by pickups that
 * pass over nothing only): no READY job its filter lets through has a
 * pickup key below `key`, while no job became READY below it since hint
 * generation `gen` (pick_hint::NothingReadyBelow). Under a transaction that
 * holds back vacuum, a worker that asks for its job types, or any pickup
 * beside a paused queue, starts past the dead entries its own claims left,
 * as an unfiltered one starts at the database's hint. One per backend, for
 * the last filter (a worker asks with the same one each time): the pick
 * statement and a copy of its filter's arrays (job types, queues, blocked
 * queues and pairs: a resume changes the filter), in TopMemoryContext. */
struct FilterHint {
	const spi::Statement *stmt = nullptr; /* none yet */
	char *filters = nullptr;
	Size filters_len = 0;
	pick_hint::PickKey key{INT64_MIN, INT64_MIN};
	uint64 gen = 0;
};
FilterHint filter_hint;

/* FiltersOf copies the arrays of a pick's filter (NULL: none), one after
 * the other, each after a byte that says whether it is there, into `buf`
 * (palloc'd in the current context), answering their length. */
constexpr int kFilterArrays = 4;
Size
FiltersOf(const ArrayType *const (&arrays)[kFilterArrays], char **buf)
{
	Size len = 0;
	for (const ArrayType *a : arrays)
		len += 1 + (a ? VARSIZE(a) : 0);
	*buf = static_cast<char *>(palloc(len));
	char *at = *buf;
	for (const ArrayType *a : arrays) {
		*at++ = a ? 'y' : 'n';
		if (a) {
			memcpy(at, a, VARSIZE(a));
			at += VARSIZE(a);
		}
	}
	return len;
}

/* HintOf answers where a pick of `stmt` with `filters` may start: its
 * filter's hint, when that holds and is beyond `start`, the database's. */
pick_hint::PickKey
HintOf(const spi::Statement &stmt, const char *filters, Size len, pick_hint::PickKey start)
{
	const FilterHint &h = filter_hint;
	if (h.stmt == &stmt && h.filters_len == len && memcmp(h.filters, filters, len) == 0 &&
	    pick_hint::Less(start, h.key) && pick_hint::NothingReadyBelow(h.key, h.gen))
		return h.key;
	return start;
}

/* KeepHint keeps `key` as of `gen` as the hint of `stmt` with `filters`. */
void
KeepHint(const spi::Statement &stmt, const char *filters, Size len, pick_hint::PickKey key, uint64 gen)
{
	FilterHint &h = filter_hint;
	if (h.stmt != &stmt || h.filters_len != len || memcmp(h.filters, filters, len) != 0) {
		if (h.filters)
			pfree(h.filters);
		h.filters = static_cast<char *>(MemoryContextAlloc(TopMemoryContext, len));
		memcpy(h.filters, filters, len);
		h.filters_len = len;
		h.stmt = &stmt;
	}
	h.key = key;
	h.gen = gen;
}

/* ClaimOnce claims up to the batch size, appending the claimed rows to
 * `out`. Claims made after waiting are stamped with the clock, others with
 * now(). Only a pickup that will not wait promotes due delayed jobs first
 * (so they take their place in priority order): rows a waiting pickup
 * promoted without claiming would stay locked until its statement ends.
 * Jobs with concurrency keys (a locking pick's only) are claimed from
 * their lanes before or after the others, by turns. */
uint64
ClaimOnce(spi::Statement &stmt, PickArgs &args, Tuplestorestate *out, TupleDesc out_desc, bool waited, bool will_wait,
          bool gated, Claims *locked = nullptr)
{
	int32 batch_size = args.batch_size;
	if (!waited && !will_wait && (citus::InShards() || next_due::MayBeDue()))
		PromoteDue(args.filter, batch_size);
	args.at = waited ? GetCurrentTimestamp() : GetCurrentTransactionStartTimestamp();
	ClaimReceiver receiver;
	StartClaims(&receiver, out, out_desc, locked, gated);
	const char *const *lane_queues;
	bool lanes = locked != nullptr && flow_control::LaneQueues(&lane_queues) > 0;
	static bool lanes_first = false;
	lanes_first = lanes && !lanes_first;
	uint64 n = lanes_first ? PickLanes(args, batch_size, &receiver) : 0;

	/* Where lanes hold the work, the pick index is often empty: after an
	 * unfiltered pick there found nothing and passed over nothing held back,
	 * it is not looked at again until a job becomes READY somewhere. */
	static Oid empty_db = InvalidOid;
	static uint64 empty_gen = 0;
	bool index_empty = lanes && empty_db == MyDatabaseId &&
	                   pick_hint::NothingReadyBelow(pick_hint::PickKey{INT64_MAX, INT64_MAX}, empty_gen);
	if (n < static_cast<uint64>(batch_size) && !index_empty) {
		/* Start at the pickup hint, past the dead entries at the head of the
		 * index that vacuum may not be allowed to remove yet. */
		pick_hint::PickKey start{INT64_MIN, INT64_MIN};
		uint64 gen = 0;
		/* The hint is the database's; shards are several tables. */
		bool hinted = !citus::InShards() && pick_hint::Read(&start, &gen);
		/* The pick's filter: its job types and queues, and the blocked
		 * queues and pairs it leaves out. */
		const ArrayType *blocked_queues =
		    args.blocked_queues == Datum(0) ? nullptr : DatumGetArrayTypeP(args.blocked_queues);
		const ArrayType *blocked_pairs =
		    args.blocked_pairs == Datum(0) ? nullptr : DatumGetArrayTypeP(args.blocked_pairs);
		bool filtered = !args.filter.Any() || blocked_queues != nullptr || blocked_pairs != nullptr;
		char *filters = nullptr;
		Size filters_len =
		    filtered ? FiltersOf({args.filter.job_types, args.filter.queues, blocked_queues, blocked_pairs}, &filters)
		             : 0;
		if (hinted && filtered)
			start = HintOf(stmt, filters, filters_len, start);
		PickArgs pick = args;
		pick.start = start;
		pick.batch_size = batch_size - static_cast<int32>(n);
		pick_hint::PickKey last;
		uint64 picked = PickInto(stmt, pick, &receiver, &last);
		/* Everything a pickup passed on its way to its last claim is
		 * claimed, dead or held by someone whose rollback lowers the hint
		 * again, or not of its filter; unless it passed over jobs its
		 * controls held back. The database's hint is raised by unfiltered
		 * pickups; a filtered one keeps a hint of its own for its filter. */
		bool clean = hinted && picked > 0 && !flow_control::HeldBack();
		if (clean && !filtered && !flow_control::Skipped())
			pick_hint::Raise(gen, last);
		else if (clean && filtered)
			KeepHint(stmt, filters, filters_len, last, gen);
		bool unfiltered = !filtered && !flow_control::Skipped();
		empty_db = hinted && picked == 0 && unfiltered ? MyDatabaseId : InvalidOid;
		empty_gen = gen;
		n += picked;
	}
	if (lanes && !lanes_first && n < static_cast<uint64>(batch_size))
		n += PickLanes(args, batch_size - static_cast<int32>(n), &receiver);

	/* Nothing promoted left: take delayed jobs that fell due since the last
	 * maintenance round. */
	if (n < static_cast<uint64>(batch_size)) {
		Datum due_values[6] = {args.worker,
		                       Int32GetDatum(batch_size - static_cast<int32>(n)),
		                       ArrayArg(args.filter.job_types),
		                       ArrayArg(args.filter.queues),
		                       TimestampTzGetDatum(GetCurrentTimestamp()),
		                       gated ? flow_control::ControlledQueues() : Datum(0)};
		char due_nulls[7] = {' ',
		                     ' ',
		                     NullIf(args.filter.job_types == nullptr),
		                     NullIf(args.filter.queues == nullptr),
		                     ' ',
		                     NullIf(!gated),
		                     '\0'};
		ClaimReceiver due_receiver;
		StartClaims(&due_receiver, out, out_desc, nullptr, gated);
		n += ExecInto(stmts::kPickDue, due_values, due_nulls, &due_receiver.pub);
	}
	return n;
}

/* SleepMs answers how long a waiter may sleep before it must look again:
 * until the deadline, or the next delayed job's due time, or (without
 * shared memory to be woken through) 50 ms. In front of a full limit, it
 * looks again every LimitedPollMs, or ten times as long as its last look
 * took (`look_ms`), so that a look that must pass over many blocked keys
 * costs a waiter a tenth of a core at most. */
long
SleepMs(bool registered, TimestampTz deadline, long look_ms)
{
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz until = deadline;
	if (!registered) {
		until = Min(deadline, TimestampTzPlusMilliseconds(now, 50));
	} else {
		TimestampTz due = next_due::Read();
		if (due == 0 || due <= now)
			due = LearnNextDue(due); /* whatever was due has been promoted */
		if (due > now && due < until)
			until = due;
		if (flow_control::LimitedLook())
			until = Min(until, TimestampTzPlusMilliseconds(now, Max(flow_control::LimitedPollMs(), 10 * look_ms)));
		TimestampTz token = flow_control::NextTokenAt();
		if (token > now && token < until)
			until = token;
	}
	/* The latch wait takes an int of milliseconds: look again hourly. */
	long ms = Min((until - now + 999) / 1000, 3600L * 1000);
	return ms < 0 ? 0 : ms;
}

/* ClaimAndDefer is ClaimOnce for a locking `stmt`, leaving the claims of
 * the jobs it locked to deferred_claims.hpp. */
uint64
ClaimAndDefer(spi::Statement &stmt, PickArgs &args, Tuplestorestate *out, TupleDesc out_desc, bool waited,
              bool will_wait, bool gated)
{
	Claims locked{0, nullptr, nullptr, nullptr, nullptr};
	uint64 n = ClaimOnce(stmt, args, out, out_desc, waited, will_wait, gated, &locked);
	/* After the last statement of this pickup, which would write them. */
	deferred_claims::Defer(locked, args.at, TextDatumGetCString(args.worker));
	return n;
}

/* ClaimBeforeWaiting is ClaimOnce (ClaimAndDefer when `defer`) for a pickup
 * that may wait next: in an internal subtransaction, rolled back when it
 * claimed nothing. A locking scan in READ COMMITTED can lock the newest
 * version of a row that another worker just claimed and then pass it over;
 * that lock would otherwise be held for the whole wait and block the
 * winner's mark_done. Deferred claims are written before the
 * subtransaction's commit, by the subtransaction that locked their rows: a
 * row locked by a subtransaction and updated by its parent carries a
 * MultiXact (one per claim of a waiting worker, 0.15.0). */
uint64
ClaimBeforeWaiting(spi::Statement &stmt, PickArgs &args, Tuplestorestate *out, TupleDesc out_desc, bool waited,
                   bool defer, bool gated)
{
	MemoryContext context = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile uint64 n = 0;
	BeginInternalSubTransaction(nullptr);
	MemoryContextSwitchTo(context);
	PG_TRY();
	{
		n = defer ? ClaimAndDefer(stmt, args, out, out_desc, waited, true, gated)
		          : ClaimOnce(stmt, args, out, out_desc, waited, true, gated);
		if (n > 0 && defer)
			deferred_claims::WriteAll();
	}
	PG_CATCH();
	{
		/* A cancel, a timeout or any other error inside the look: the
		 * subtransaction is ours to roll back. Left open, it would outlive
		 * the statement and leave the session in an aborted transaction
		 * (25P02 for its next statement, behind a pooler for the next
		 * client). */
		MemoryContextSwitchTo(context);
		ErrorData *edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(context);
		CurrentResourceOwner = owner;
		ReThrowError(edata);
	}
	PG_END_TRY();
	if (n > 0)
		ReleaseCurrentSubTransaction();
	else
		RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(context);
	CurrentResourceOwner = owner;
	return n;
}

/* LongPoll registers as a waiter for up to `batch` jobs a look (before the
 * first look, so a commit during it wakes us) and calls look(waited) until
 * it answers true or the wait ends, sleeping on the latch in between: a
 * commit that makes a matching job runnable (wake.cpp), a delayed job's due
 * time or the deadline wakes it.
 * before_sleep() runs after each look. Both may raise PostgreSQL errors
 * (the waiter still leaves the table) but must not throw C++ exceptions.
 * Each look runs in a memory context of its own, reset after it, so a wait
 * uses as much memory after an hour as after its first look: whatever a
 * look hands on (claims, rows) is copied where it outlives it. */
template <typename Look, typename BeforeSleep>
void
LongPoll(const PickFilter &filter, int32 batch, int64 wait_ms, Look look, BeforeSleep before_sleep)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
	bool registered = wake::Register(filter, batch);
	volatile bool found = false;
	MemoryContext look_context = AllocSetContextCreate(CurrentMemoryContext, "pqrun look", ALLOCSET_DEFAULT_SIZES);
	PG_TRY();
	{
		for (bool waited = false;; waited = true) {
			if (registered)
				wake::PrepareCheck();
			MemoryContext outer = MemoryContextSwitchTo(look_context);
			TimestampTz look_began = GetCurrentTimestamp();
			found = look(waited);
			MemoryContextSwitchTo(outer);
			if (registered)
				wake::LookDone();
			long look_ms = static_cast<long>((GetCurrentTimestamp() - look_began) / 1000);
			long sleep_ms = found ? 0 : SleepMs(registered, deadline, look_ms);
			before_sleep();
			MemoryContextReset(look_context);
			if (sleep_ms <= 0)
				break;
			(void)client_wait::Sleep(sleep_ms, compat::ExtensionWaitEvent(long_poll_wait_event, "PqrunLongPoll"));
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		/* A waiter woken for a job it did not take (cancelled, timed out,
		 * failed) passes the wake-up on. */
		if (registered)
			wake::Unregister(found);
	}
	PG_END_TRY();
	MemoryContextDelete(look_context);
}

/* EnterQueues scopes the transaction to the shards of `queues`, which a
 * pickup on Citus must name (citus.hpp). */
void
EnterQueues(ArrayType *queues)
{
	if (!citus::JobTablesDistributed())
		return;
	if (queues == nullptr)
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("on Citus, a pickup names its queues"),
		         errdetail("pqrun's tables are distributed by queue; a pickup works on the shards of its queues."),
		         errhint("Pass queues => ARRAY[...], queues whose shards are on this node.")));
	Datum *elems;
	bool *nulls;
	int n;
	deconstruct_array(queues, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i]) /* a NULL queue holds no job */
			citus::EnterQueue(TextDatumGetCString(elems[i]));
}

} // namespace

TimestampTz
LearnNextDue(TimestampTz seen)
{
	bool isnull = true;
	Datum next = Datum(0);
	/* What it learns is shared with every waiter of the database. */
	int nest_level = guc::PinSearchPath();
	if (Exec(stmts::kNextDelayed, nullptr, nullptr, SPI_OK_SELECT) > 0)
		next = Col(0, 1, &isnull);
	guc::Unpin(nest_level);
	TimestampTz due = isnull ? DT_NOEND : DatumGetTimestampTz(next);
	next_due::Replace(seen, due);
	return due;
}

uint64
PickUp(text *worker_id, const PickFilter &filter, int32 batch_size, int64 wait_ms, Tuplestorestate *out,
       TupleDesc out_desc)
{
	/* Its snapshot could never show a job committed during the wait. */
	if (wait_ms > 0 && IsolationUsesXactSnapshot())
		ereport(ERROR,
		        (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("a waiting pickup needs a READ COMMITTED transaction"),
		         errdetail("Under REPEATABLE READ or SERIALIZABLE its snapshot cannot see jobs committed while "
		                   "it waits."),
		         errhint("Pick up without wait, or wait with CALL pqrun.await_jobs() outside the transaction.")));
	EnterQueues(filter.queues);
	PickArgs args{PointerGetDatum(worker_id), batch_size, filter, {0, 0}, 0, Datum(0), Datum(0)};
	/* Each look first learns what the controls allow; when a limit or a
	 * rate limit applies, the pick only locks, so a job whose limit filled
	 * meanwhile can be passed over (flow_control.hpp). Pauses alone are
	 * left out whole by the pick's filter of blocked queues. */
	bool defer, gated;
	auto gate = [&]() -> spi::Statement & {
		gated = flow_control::PrepareLook(filter, batch_size);
		args.SetBlocked(gated);
		/* Keyed jobs are claimed by locking picks only (pick_lanes.hpp). */
		const char *const *lane_queues;
		defer = deferred_claims::ShouldDefer() || (gated && !flow_control::PausesOnly()) ||
		        flow_control::LaneQueues(&lane_queues) > 0;
		return PickStatement(filter, defer);
	};
	bool claims_only = pickup_commit::ClaimsOnlySoFar();
	uint64 claimed = 0;
	if (wait_ms <= 0) {
		spi::Statement &stmt = gate();
		claimed = defer ? ClaimAndDefer(stmt, args, out, out_desc, false, false, gated)
		                : ClaimOnce(stmt, args, out, out_desc, false, false, gated);
	} else {
		LongPoll(
		    filter, batch_size, wait_ms,
		    [&](bool waited) {
			    spi::Statement &stmt = gate();
			    claimed = ClaimBeforeWaiting(stmt, args, out, out_desc, waited, defer, gated);
			    return claimed > 0;
		    },
		    [] {});
	}
	pickup_commit::AfterPickup(claims_only);
	return claimed;
}

bool
AwaitJobs(const PickFilter &filter, int64 wait_ms)
{
	bool ready = false;
	/* Its caller picks up next: counted as a waiter for one job. */
	LongPoll(
	    filter, 1, wait_ms,
	    [&](bool) {
		    EnterQueues(filter.queues); /* again after each commit */
		    bool gated = flow_control::PrepareLook(filter, 1);
		    PickArgs args{Datum(0), 1, filter, {INT64_MIN, INT64_MIN}, 0, Datum(0), Datum(0)};
		    args.SetBlocked(gated);
		    /* kReadyExists and kDueExists: the filter, the clock, the
		     * blocked queues and pairs. */
		    Datum values[5] = {ArrayArg(filter.job_types), ArrayArg(filter.queues),
		                       TimestampTzGetDatum(GetCurrentTimestamp()), args.blocked_queues, args.blocked_pairs};
		    char nulls[6] = {NullIf(filter.job_types == nullptr),     NullIf(filter.queues == nullptr),       ' ',
		                     NullIf(args.blocked_queues == Datum(0)), NullIf(args.blocked_pairs == Datum(0)), '\0'};
		    /* A filtered look reads its own lanes only (pick_direct.hpp). */
		    uint64 gen;
		    if (!citus::InShards())
			    (void)pick_hint::Read(&args.start, &gen);
		    pick_direct::Request request{Datum(0), 1, filter, args.start, 0, gated};
		    bool lanes_ready = false;
		    bool by_lanes = pick_direct::AnyReady(request, &lanes_ready);
		    /* await_jobs runs as its caller (it commits, so it cannot be
		          * SECURITY DEFINER); a superuser caller must still not run
		          * the operators of whoever set the database's search_path. */
		    int nest_level = guc::PinSearchPath();
		    ready = lanes_ready;
		    if (!ready) {
			    Exec(by_lanes ? stmts::kDueExists : stmts::kReadyExists, values, nulls, SPI_OK_SELECT);
			    ready = ColBool(0, 1) || pick_lanes::Ready(filter);
		    }
		    guc::Unpin(nest_level);
		    return ready;
	    },
	    /* Commit before sleeping: no snapshot is held while waiting. */
	    [] { SPI_commit(); });
	return ready;
}

/* PromoteDue makes delayed jobs whose run_after has passed (by the clock,
 * not the transaction start, so a long poll sees them fall due) runnable. */
uint64
PromoteDue(const PickFilter &filter, int32 limit)
{
	Datum values[4] = {TimestampTzGetDatum(GetCurrentTimestamp()), ArrayArg(filter.job_types), ArrayArg(filter.queues),
	                   Int32GetDatum(limit)};
	char nulls[5] = {' ', NullIf(filter.job_types == nullptr), NullIf(filter.queues == nullptr), ' ', '\0'};
	uint64 n = Exec(stmts::kPromoteDue, values, nulls, SPI_OK_UPDATE_RETURNING);
	NoteRows(n, ReadyRows::kReady);
	return n;
}

} // namespace pqrun::jobs
