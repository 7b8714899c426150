/* src/jobs/pick_lanes.cpp — claiming jobs that have a concurrency key
 * (pick_lanes.hpp). */
#include "jobs/pick_lanes.hpp"

#include "jobs/flow_control.hpp"
#include "jobs/pick_direct.hpp"
#include "jobs/pick_sql.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"
#include "xact/wake.hpp"

namespace pqrun::pick_lanes {

namespace stmts {

#define IN_LANE "status = 'READY' AND NOT delayed AND concurrency_key IS NOT NULL"
/* job_live_lane's columns, in its byte order. */
#define LANE_QUEUE "queue COLLATE pg_catalog.\"C\""
#define LANE_KEY "concurrency_key COLLATE pg_catalog.\"C\""

/* The first key after $2 in queue $1's lanes with a READY job ('' comes
 * before every key: enqueue refuses an empty one). One descent of
 * job_live_lane; the rows of the keys it passes are not read. */
spi::Statement kNextKey{"next lane key",
                        "SELECT concurrency_key FROM pqrun.job_live"
                        " WHERE " IN_LANE " AND " LANE_QUEUE " = $1 AND " LANE_KEY " > $2"
                        " ORDER BY " LANE_KEY " LIMIT 1",
                        2,
                        {TEXTOID, TEXTOID}};

/* Lock up to $2 jobs of lane ($4, $5) in pickup order, of job types $3,
 * none of the blocked pairs $6, for worker $1 at time $7 (LOCKED_AS_JOB);
 * none of the jobs $8 this pickup locked already, which its own lock does
 * not hide (their claims are written when the pickup ends). */
spi::Statement kLockLane{"lock lane",
                         "SELECT " LOCKED_AS_JOB ", ctid FROM pqrun.job_live"
                         " WHERE " IN_LANE " AND " LANE_QUEUE " = $4 AND " LANE_KEY " = $5"
                         "   AND ($3::text[] IS NULL OR job_type = ANY ($3))" PQRUN_NOT_BLOCKED_PAIR("$6")
                         "   AND id <> ALL ($8)"
                         " ORDER BY (-(priority::bigint)), id LIMIT $2 FOR UPDATE SKIP LOCKED",
                         8,
                         {TEXTOID, INT4OID, TEXTARRAYOID, TEXTOID, TEXTOID, TEXTARRAYOID, TIMESTAMPTZOID,
                          INT8ARRAYOID}};

/* Whether lane ($1, $2) holds a READY job of job types $3. In the lane's
 * order, so that no plan reads the table instead: without an order, the
 * generic plan's LIMIT 1 read all of job_live (it expects a key's jobs to
 * be many and early; a lane asked about is often empty). */
spi::Statement kLaneHasJob{"lane has job",
                           "SELECT 1 FROM pqrun.job_live WHERE " IN_LANE " AND " LANE_QUEUE " = $1 AND " LANE_KEY
                           " = $2"
                           "   AND ($3::text[] IS NULL OR job_type = ANY ($3))"
                           " ORDER BY (-(priority::bigint)), id LIMIT 1",
                           3,
                           {TEXTOID, TEXTOID, TEXTARRAYOID}};

#undef IN_LANE
#undef LANE_QUEUE
#undef LANE_KEY

} // namespace stmts

namespace {

/* One step between keys of a queue's lanes as a look found it: the key
 * after `after` ("" for the first) is `next` (nullptr: none). */
struct Step {
	char *after;
	char *next;
};
constexpr int kMaxSteps = 128;

/* That a look found every key of a queue's lanes blocked by a concurrency
 * limit (flow_control::KeyBlocked's by_limit) and claimed nothing, with the
 * queue's and the controls' generations read before the look: until either
 * moves (a job of the queue became READY, a place in one of its limits was
 * freed, a limit changed), its keys are all still blocked, and the next
 * looks pass the queue over instead of visiting each key again. Until
 * `until` at most: a place may also come free by a path that does not tell
 * (a prepared transaction's end, found by a recount), so the queue is
 * walked again every second, or every ten times as long as the walk took,
 * whichever is longer. */
struct Blocked {
	bool all;
	uint64 queue_gen;
	uint64 controls_gen;
	TimestampTz until;
};

/* Where this backend's last claim from each keyed queue's lanes was: the
 * next pickup starts at the key after it. A few queues suffice; an entry
 * for a queue not used lately is given to the next one. With it, the steps
 * between the queue's keys that looks found since hint generation
 * `steps_gen`: keys appear only with jobs that become READY, which moves
 * the generation, so while nothing did (pick_hint::NothingReadyBelow) a step is
 * taken again without a descent. A step may lead to a key whose jobs all
 * ended since, which is then visited for nothing, as a descent would. */
struct Cursor {
	char *queue; /* nullptr: unused */
	char *key;
	Step *steps; /* kMaxSteps, TopMemoryContext */
	int nsteps;
	uint64 steps_gen;
	Blocked blocked;
};
constexpr int kCursors = 16;
Cursor cursors[kCursors];
int next_victim = 0;

void
ForgetSteps(Cursor &c)
{
	for (int i = 0; i < c.nsteps; i++) {
		pfree(c.steps[i].after);
		if (c.steps[i].next)
			pfree(c.steps[i].next);
	}
	c.nsteps = 0;
}

Cursor &
CursorOf(const char *queue)
{
	for (Cursor &c : cursors)
		if (c.queue != nullptr && strcmp(c.queue, queue) == 0)
			return c;
	Cursor &c = cursors[next_victim];
	next_victim = (next_victim + 1) % kCursors;
	if (c.queue)
		pfree(c.queue);
	if (c.key)
		pfree(c.key);
	ForgetSteps(c);
	c.queue = MemoryContextStrdup(TopMemoryContext, queue);
	c.key = nullptr;
	c.blocked.all = false;
	return c;
}

/* Generations is what a queue's Blocked holds by, read before a look. */
struct Generations {
	uint64 queue_gen;
	uint64 controls_gen;
};

Generations
GenerationsOf(const char *queue)
{
	uint64 queue_gen;
	wake::QueueGens(&queue, 1, &queue_gen);
	return Generations{queue_gen, wake::ControlsGen()};
}

/* StillBlocked answers whether cursor `c`'s queue is known to have every
 * key blocked by a limit, as of generations `now` (read before the look). */
bool
StillBlocked(const Cursor &c, const Generations &now)
{
	return c.blocked.all && c.blocked.queue_gen == now.queue_gen && c.blocked.controls_gen == now.controls_gen &&
	       now.controls_gen != wake::kNoControlsGen && GetCurrentTimestamp() < c.blocked.until;
}

/* NoteWalk records what the walk of cursor `c`'s queue that began at
 * `began` under generations `gens` found: whether every key it visited
 * (`visited` of them) was blocked by a limit, `all_blocked`, with no claim. */
void
NoteWalk(Cursor &c, const Generations &gens, TimestampTz began, int visited, bool all_blocked)
{
	c.blocked.all = visited > 0 && all_blocked;
	if (!c.blocked.all)
		return;
	TimestampTz now = GetCurrentTimestamp();
	c.blocked.queue_gen = gens.queue_gen;
	c.blocked.controls_gen = gens.controls_gen;
	c.blocked.until = now + Max(static_cast<TimestampTz>(USECS_PER_SEC), 10 * (now - began));
}

/* KeyAfter answers the key after `after` in the cursor's queue, from a step
 * found before when they are `known` to hold, else from look(after), whose
 * answer becomes a step when `keep`. */
template <typename Look>
char *
KeyAfter(Cursor &c, bool known, bool keep, const char *after, Look look)
{
	for (int i = 0; known && i < c.nsteps; i++)
		if (strcmp(c.steps[i].after, after) == 0)
			return c.steps[i].next ? pstrdup(c.steps[i].next) : nullptr;
	char *next = look(after);
	if (keep && c.nsteps < kMaxSteps) {
		if (c.steps == nullptr)
			c.steps = static_cast<Step *>(MemoryContextAlloc(TopMemoryContext, sizeof(Step) * kMaxSteps));
		c.steps[c.nsteps++] = Step{MemoryContextStrdup(TopMemoryContext, after),
		                           next ? MemoryContextStrdup(TopMemoryContext, next) : nullptr};
	}
	return next;
}

void
MoveCursor(Cursor &c, const char *key)
{
	if (c.key)
		pfree(c.key);
	c.key = MemoryContextStrdup(TopMemoryContext, key);
}

/* Lane hints: as the pickup hint does for the pick index (pick_hint.hpp), where
 * a lane's scan may start, past its dead head: no job of the lane before
 * `start` was READY as of hint generation `gen`, and the hint holds while
 * pick_hint::NothingReadyBelow(start, gen). Shared by the backends of the server,
 * like the pickup hint, so that pickups of one lane at once start past each
 * other's claims instead of each walking over them again: a slot per lane
 * by a hash of (database, queue, key), two 64-bit hashes telling lanes
 * apart (a lane that meets another's slot starts at its head). */
struct LaneHint {
	Oid db; /* InvalidOid: free */
	uint64 hash;
	uint64 check;
	pick_hint::PickKey start;
	uint64 gen;
};
constexpr int kLaneHints = 1024;
struct SharedLaneHints {
	slock_t mutex;
	LaneHint slots[kLaneHints];
};
SharedLaneHints *shared_hints = nullptr;

/* LaneOf names lane (queue, key) in the hints. */
LaneHint
LaneOf(const char *queue, const char *key)
{
	Size qlen = strlen(queue), klen = strlen(key);
	char *name = static_cast<char *>(palloc(qlen + klen + 2));
	memcpy(name, queue, qlen + 1);
	memcpy(name + qlen + 1, key, klen + 1);
	const auto *bytes = reinterpret_cast<const unsigned char *>(name);
	int len = static_cast<int>(qlen + klen + 1);
	LaneHint lane{MyDatabaseId, hash_bytes_extended(bytes, len, MyDatabaseId),
	              hash_bytes_extended(bytes, len, UINT64CONST(0x5051525553484e54)), pick_hint::PickKey{INT64_MIN, INT64_MIN},
	              0};
	pfree(name);
	return lane;
}

/* ReadHint answers where lane `lane` may start now: its hint while it
 * holds, else its head. */
pick_hint::PickKey
ReadHint(const LaneHint &lane)
{
	pick_hint::PickKey head{INT64_MIN, INT64_MIN};
	if (shared_hints == nullptr)
		return head;
	LaneHint &slot = shared_hints->slots[lane.hash % kLaneHints];
	SpinLockAcquire(&shared_hints->mutex);
	LaneHint hint = slot;
	SpinLockRelease(&shared_hints->mutex);
	if (hint.db != lane.db || hint.hash != lane.hash || hint.check != lane.check ||
	    !pick_hint::NothingReadyBelow(hint.start, hint.gen))
		return head;
	return hint.start;
}

/* WriteHint records that no job of lane `lane` before `start` was READY as
 * of generation `gen`, unless its slot holds a later start of the same
 * generation (another pickup's claim further on). */
void
WriteHint(const LaneHint &lane, pick_hint::PickKey start, uint64 gen)
{
	if (shared_hints == nullptr)
		return;
	LaneHint &slot = shared_hints->slots[lane.hash % kLaneHints];
	SpinLockAcquire(&shared_hints->mutex);
	bool same = slot.db == lane.db && slot.hash == lane.hash && slot.check == lane.check;
	if (!same || slot.gen < gen || (slot.gen == gen && pick_hint::Less(slot.start, start))) {
		slot = lane;
		slot.start = start;
		slot.gen = gen;
	}
	SpinLockRelease(&shared_hints->mutex);
}

/* HintOf is the slot content of filter lane `lane`. */
LaneHint
HintOf(const FilterLaneName &lane)
{
	return LaneHint{MyDatabaseId, lane.hash, lane.check, pick_hint::PickKey{INT64_MIN, INT64_MIN}, 0};
}

} // namespace

FilterLaneName
NameFilterLane(Datum queue, Datum job_type)
{
	StringInfoData name;
	initStringInfo(&name);
	if (queue != Datum(0)) {
		text *q = DatumGetTextPP(queue);
		appendBinaryStringInfo(&name, VARDATA_ANY(q), VARSIZE_ANY_EXHDR(q));
	}
	appendStringInfoChar(&name, queue != Datum(0) ? '\0' : '\1');
	text *t = DatumGetTextPP(job_type);
	appendBinaryStringInfo(&name, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	const auto *bytes = reinterpret_cast<const unsigned char *>(name.data);
	FilterLaneName lane{hash_bytes_extended(bytes, name.len, MyDatabaseId ^ UINT64CONST(0x46494c5445520000)),
	                    hash_bytes_extended(bytes, name.len, UINT64CONST(0x46494c5445525f32))};
	pfree(name.data);
	return lane;
}

namespace {

/* NextKey answers the first key of `queue`'s lanes after `after`, or
 * nullptr (through SQL). */
char *
NextKey(Datum queue, const char *after)
{
	Datum values[2] = {queue, CStringGetTextDatum(after)};
	if (spi::Exec(stmts::kNextKey, values, nullptr, SPI_OK_SELECT, 1) == 0)
		return nullptr;
	return spi::ColText(0, 1);
}

/* Walk visits the keys of `queue`'s lanes in turn from the one after
 * `start` (nullptr: the first), wrapping around, calling visit(key) for
 * each, which answers whether it claimed; next_key(queue, after) finds
 * them. Stops when `enough`() or when a whole round of keys claimed
 * nothing. */
template <typename NextKeyOf, typename Visit, typename Enough>
void
Walk(Datum queue, const char *start, NextKeyOf next_key, Visit visit, Enough enough)
{
	const char *after = start ? start : "";
	char *idle_since = nullptr; /* the first key of the current run of visits that claimed nothing */
	int idle_wraps = 0;         /* times the run went around the end of the lanes */
	while (!enough()) {
		CHECK_FOR_INTERRUPTS();
		char *key = next_key(queue, after);
		if (key == nullptr) {
			/* The end of the lanes: around again from the first key, unless
			 * there is none, or a run without claims already went around
			 * once (its first key may have emptied meanwhile). */
			if (after[0] == '\0' || (idle_since != nullptr && ++idle_wraps > 1))
				return;
			after = "";
			continue;
		}
		if (idle_since != nullptr && strcmp(idle_since, key) == 0)
			return; /* a whole round without a claim */
		if (visit(key)) {
			idle_since = nullptr;
			idle_wraps = 0;
		} else if (idle_since == nullptr) {
			idle_since = key;
		}
		after = key;
	}
}

} // namespace

uint64
Pick(const Request &r, const Receiver &to)
{
	const char *const *queues;
	int nqueues = flow_control::LaneQueues(&queues);
	int before = *to.claimed;
	if (nqueues == 0)
		return 0;
	/* Before the scans' snapshot: what becomes READY after it unsettles
	 * their hints and steps. A transaction snapshot (REPEATABLE READ, the
	 * SQL statements only) may be older than that: its looks are not kept. */
	uint64 gen = pick_hint::Gen();
	uint64 controls_gen = wake::ControlsGen();
	uint64 *queue_gens = static_cast<uint64 *>(palloc(sizeof(uint64) * nqueues));
	wake::QueueGens(queues, nqueues, queue_gens);
	bool keep = !IsolationUsesXactSnapshot();
	/* Below the executor when pick_direct.hpp can, else through SQL. */
	pick_direct::Request direct_request{r.worker, r.want, PickFilter{r.filter.job_types, nullptr}, {0, 0}, r.at, r.gated};
	pick_direct::LaneScan scan;
	bool direct = scan.Open(direct_request, to.out_desc, to.emit, to.arg, to.claimed_ids, to.claimed);
	for (int q = 0; q < nqueues && *to.claimed - before < r.want; q++) {
		Datum queue = CStringGetTextDatum(queues[q]);
		if (r.gated && flow_control::QueueBlocked(queue))
			continue;
		Cursor &cursor = CursorOf(queues[q]);
		Generations gens{queue_gens[q], controls_gen};
		if (StillBlocked(cursor, gens)) {
			flow_control::NoteLimitedLook();
			continue;
		}
		TimestampTz began = GetCurrentTimestamp();
		int visited = 0, claimed_before = *to.claimed;
		bool all_blocked = true;
		bool known = keep && cursor.nsteps > 0 &&
		             pick_hint::NothingReadyBelow(pick_hint::PickKey{INT64_MAX, INT64_MAX}, cursor.steps_gen);
		if (!known) {
			ForgetSteps(cursor);
			cursor.steps_gen = gen;
		}
		auto next_key = [&](Datum queue_text, const char *after) {
			return KeyAfter(cursor, known, keep, after, [&](const char *from) {
				return direct ? scan.NextKey(queue_text, from) : NextKey(queue_text, from);
			});
		};
		Walk(
		    queue, cursor.key, next_key,
		    [&](const char *key) {
			    Datum key_text = CStringGetTextDatum(key);
			    bool by_limit;
			    visited++;
			    if (flow_control::KeyBlocked(queue, key_text, &by_limit)) {
				    all_blocked = all_blocked && by_limit;
				    return false;
			    }
			    all_blocked = false;
			    int had = *to.claimed;
			    if (direct) {
				    LaneHint lane = LaneOf(queues[q], key);
				    pick_hint::PickKey start = ReadHint(lane);
				    if (start.neg_priority == INT64_MAX)
					    return false; /* the lane was empty, and nothing became READY since */
				    pick_hint::PickKey passed;
				    bool clean;
				    scan.LockOne(queue, key_text, start, &passed, &clean);
				    if (clean)
					    WriteHint(lane, passed, gen);
			    } else {
				    Datum values[8] = {r.worker,
				                       Int32GetDatum(1),
				                       PointerGetDatum(r.filter.job_types),
				                       queue,
				                       key_text,
				                       r.blocked_pairs,
				                       TimestampTzGetDatum(r.at),
				                       spi::Int8Array(*to.claimed_ids, *to.claimed)};
				    char nulls[9] = {' ', ' ', r.filter.job_types ? ' ' : 'n', ' ', ' ', r.blocked_pairs ? ' ' : 'n', ' ',
				                     ' ', '\0'};
				    spi::ExecInto(stmts::kLockLane, values, nulls, to.dest);
			    }
			    if (*to.claimed == had)
				    return false;
			    MoveCursor(cursor, key);
			    return true;
		    },
		    [&] { return *to.claimed - before >= r.want; });
		NoteWalk(cursor, gens, began, visited, all_blocked && *to.claimed == claimed_before);
	}
	if (direct)
		scan.Close();
	return *to.claimed - before;
}

pick_hint::PickKey
FilterLaneStart(const FilterLaneName &lane)
{
	return ReadHint(HintOf(lane));
}

void
FilterLaneHint(const FilterLaneName &lane, pick_hint::PickKey start, uint64 gen)
{
	WriteHint(HintOf(lane), start, gen);
}

Size
ShmemSize()
{
	return MAXALIGN(sizeof(SharedLaneHints));
}

void
ShmemInit()
{
	bool found;
	shared_hints = static_cast<SharedLaneHints *>(ShmemInitStruct("pqrun lane hints", ShmemSize(), &found));
	if (!found) {
		SpinLockInit(&shared_hints->mutex);
		for (LaneHint &slot : shared_hints->slots)
			slot.db = InvalidOid;
	}
}

bool
Ready(const PickFilter &filter)
{
	ArrayType *job_types = filter.job_types;
	const char *const *queues;
	int nqueues = flow_control::LaneQueues(&queues);
	bool ready = false;
	for (int q = 0; q < nqueues && !ready; q++) {
		Datum queue = CStringGetTextDatum(queues[q]);
		if (flow_control::QueueBlocked(queue))
			continue;
		/* Each statement below takes its snapshot after these are read. */
		Generations gens = GenerationsOf(queues[q]);
		Cursor &cursor = CursorOf(queues[q]);
		if (StillBlocked(cursor, gens)) {
			flow_control::NoteLimitedLook();
			continue;
		}
		TimestampTz began = GetCurrentTimestamp();
		int visited = 0;
		bool all_blocked = true;
		Walk(
		    queue, nullptr, NextKey,
		    [&](const char *key) {
			    Datum values[3] = {queue, CStringGetTextDatum(key), PointerGetDatum(job_types)};
			    char nulls[4] = {' ', ' ', job_types ? ' ' : 'n', '\0'};
			    bool by_limit;
			    visited++;
			    if (flow_control::KeyBlocked(queue, values[1], &by_limit)) {
				    all_blocked = all_blocked && by_limit;
				    return false;
			    }
			    all_blocked = false;
			    ready = spi::Exec(stmts::kLaneHasJob, values, nulls, SPI_OK_SELECT, 1) > 0;
			    return ready;
		    },
		    [&] { return ready; });
		NoteWalk(cursor, gens, began, visited, all_blocked && !ready);
	}
	return ready;
}

} // namespace pqrun::pick_lanes
