/* src/jobs/flow_control.cpp — pauses, concurrency limits and rate limits at
 * claim time (flow_control.hpp).
 *
 * Shared memory holds, server-wide, one Counter per limit or rate limit in
 * use (a rate limit's bucket is in it), a pool of Places, each a claimed
 * job counted in one limit, chained per counter, and the KeyBuckets of the
 * rate limits per key. One LWLock guards them all: it
 * is taken only by pickups of controlled queues, and held for list walks
 * bounded by the limit, never for I/O.
 */
#include "jobs/flow_control.hpp"

#include "guc.hpp"
#include "jobs/keyed_queues.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"
#include "shmem/locks.hpp"
#include "shmem/shmem.hpp"
#include "xact/wake.hpp"

namespace pqrun::flow_control {

namespace stmts {

#define PQRUN_CONTROL_COLUMNS                                                                                          \
	"SELECT id, queue, job_type, paused, max_running, rate, burst" PQRUN_CONTROL_KEYS PQRUN_CONTROL_KEY_RATES        \
	" FROM pqrun.queue_control"
spi::Statement kLoadControls{"load controls", PQRUN_CONTROL_COLUMNS, 0, {}};

/* The controls of one queue, read again after a change of them. */
spi::Statement kLoadQueueControls{"load controls of a queue", PQRUN_CONTROL_COLUMNS " WHERE queue = $1", 1, {TEXTOID}};

/* The jobs a limit counts, when it is first needed, with their keys. */
/* The runs a limit counts when its count starts: the RUNNING jobs as
 * committed, and the READY ones that a prepared transaction of the
 * database ($3, the ids of those transactions, NULL: none) holds, with it:
 * its claims, which only its COMMIT PREPARED shows as RUNNING, and which
 * after a restart nothing else remembers. */
#define PQRUN_LOAD_RUNNING(match)                                                                                      \
	"SELECT id, lease_token, NULL::xid AS xid" PQRUN_JOB_KEY " FROM pqrun.job_live WHERE status = 'RUNNING' AND " match \
	" UNION ALL SELECT id, NULL, xmax" PQRUN_JOB_KEY " FROM pqrun.job_live"                                           \
	" WHERE $3::xid[] IS NOT NULL AND status = 'READY' AND " match " AND xmax = ANY ($3)"
spi::Statement kLoadRunning{"load running",
                            PQRUN_LOAD_RUNNING("queue = $1 AND ($2::text IS NULL OR job_type = $2)"),
                            3,
                            {TEXTOID, TEXTOID, XIDARRAYOID}};

spi::Statement kLoadRunningKey{"load running of key",
                               PQRUN_LOAD_RUNNING("queue = $1 AND concurrency_key = $2"),
                               3,
                               {TEXTOID, TEXTOID, XIDARRAYOID}};

spi::Statement kPreparedHere{"prepared transactions of the database",
                             "SELECT pg_catalog.array_agg(transaction) FROM pg_catalog.pg_prepared_xact()"
                             " WHERE dbid = $1",
                             1,
                             {OIDOID}};

/* A queue whose jobs have keys: its pickups walk its lanes from now on. */
/* Whether queue $1 is marked keyed. */
spi::Statement kMarked{"keyed mark",
                       "SELECT 1 FROM pqrun.queue_control WHERE queue = $1 AND job_type IS NULL"
                       "   AND concurrency_key IS NULL AND keyed",
                       1,
                       {TEXTOID}};

spi::Statement kNoteKeyed{"note keyed queue",
                          "INSERT INTO pqrun.queue_control AS c (queue, keyed) VALUES ($1, true)"
                          " ON CONFLICT (queue, job_type" PQRUN_JOB_KEY ") DO UPDATE SET keyed = true,"
                          "   updated_at = pg_catalog.now() WHERE NOT c.keyed",
                          1,
                          {TEXTOID}};

/* Which of the counted claims still run. */
spi::Statement kStillRunning{"still running",
                             "SELECT id, lease_token FROM pqrun.job_live WHERE id = ANY ($1) AND status = 'RUNNING'",
                             1,
                             {INT8ARRAYOID}};

} // namespace stmts

namespace {

constexpr int kMaxCounters = 256;
constexpr int kMaxPlaces = 16384;
/* A full limit is looked at again at most this often, unless a
 * transaction that ended more runs than it could note gave them back by
 * marking every limit (Counter::dirty). */
constexpr int kVerifyEveryMs = 20;
/* A waiter held back by a full limit looks again at least this often. */
constexpr int kLimitedPollMs = 250;

struct Place {
	int32 counter; /* -1: free */
	int32 next;    /* the counter's next place, -1: none */
	int64 job_id;
	pg_uuid_t token;   /* the claim's lease token: a job given back and claimed again is another claim */
	TransactionId xid; /* the claiming transaction; invalid: found running when loaded */
	uint64 key_hash;   /* KeyHash of the job's concurrency key, 0: none */
};

struct Counter {
	Oid dboid; /* InvalidOid: free */
	int64 control_id;
	int32 used; /* places taken (a limit) */
	int32 head;
	bool placed; /* its places were loaded: a limit's counter, or one a limit was added to */
	bool dirty;  /* runs of the database ended without giving back their places (NoteEnded) */
	TimestampTz verified_at;
	double tokens; /* a rate limit's bucket, as of refilled_at */
	TimestampTz refilled_at;
	int32 verify_from = 0; /* where in its chain of places the next recount starts (Verify) */
};
constexpr Counter kFreeCounter{InvalidOid, 0, 0, -1, false, false, 0, 0, 0};

/* The bucket of one key under its queue's rate limit per key, found by
 * probing kKeyProbe slots from the hash of (control, key). Its rate and
 * burst are copied from the control at each use, so that whether it is full
 * (and may be forgotten) is known without the control. */
constexpr int kMaxKeyBuckets = 4096;
constexpr int kKeyProbe = 16;
struct KeyBucket {
	Oid dboid; /* InvalidOid: free */
	int64 control_id;
	uint64 key_hash;
	double tokens;
	TimestampTz refilled_at;
	double rate;
	int32 burst;
};

struct SharedPlaces {
	LWLock *lock;
	int32 nfree;
	Counter counters[kMaxCounters];
	int32 free_list[kMaxPlaces];
	Place places[kMaxPlaces];
	KeyBucket key_buckets[kMaxKeyBuckets];
};

SharedPlaces *shared = nullptr;

/* This backend's copy of pqrun.queue_control, in TopMemoryContext. */
struct Control {
	int64 id;
	char *queue;
	int queue_len;
	char *job_type; /* nullptr: every type of the queue */
	int job_type_len;
	bool paused;
	int32 max_running; /* -1: no limit */
	double rate;       /* claims per second, 0: no rate limit */
	int32 burst;       /* the most tokens its bucket holds */
	char *key;         /* a key's own control: its concurrency key, else nullptr */
	int key_len;
	int32 max_per_key;   /* a queue's limit for each of its keys, -1: none */
	bool keyed;          /* a queue whose jobs have had keys: pickups walk its lanes */
	double rate_per_key; /* a queue's rate limit for each of its keys, 0: none */
	int32 burst_per_key;
	int counter; /* its Counter, -1: not known yet */
};
Control *controls = nullptr;
int ncontrols = 0;
int controls_room = 0;
bool cache_valid = false;
uint64 cache_gen = 0;
Oid cache_db = InvalidOid;
int nplaced = 0;             /* controls with a concurrency limit */
bool keys_installed = false; /* pqrun.queue_control has the columns of keys (0.10.0) */

bool changed_here = false; /* this transaction changed the controls */
/* The trigger on pqrun.queue_control (0.19.0) told of this transaction's
 * changes, queue by queue: a write of an older install, without it, stands
 * for a change of every queue's controls. */
bool trigger_fired = false;
/* The queues whose controls this transaction changed, in TopMemoryContext:
 * the copy reads them again after each change (own_seq moved), which its
 * own uncommitted writes and a subtransaction's rollback make, and once
 * more after the transaction ended, committed or not. More than kMaxOwn
 * (own_overflow): the whole copy is read instead. */
constexpr int kMaxOwn = 64;
char *own_names[kMaxOwn];
int own_lens[kMaxOwn];
int nown = 0;
bool own_overflow = false;
uint64 own_seq = 0;
uint64 own_read = 0;
/* The places of the claims whose runs this transaction ended, given back
 * at its commit (NoteEnded). More than kMaxEnded: every limit of the
 * database is looked at again instead (Counter::dirty). */
struct Ended {
	int counter;
	int64 job_id;
	pg_uuid_t token;
	TransactionId xid;
	int level;
};
constexpr int kMaxEnded = 256;
Ended ended[kMaxEnded];
int nended = 0;
bool ended_overflow = false;
bool limited_look = false;
bool skipped = false;
bool held_back = false; /* a row of the look was passed over by Blocked or Reserve, not by the pick's filter */
bool counted_applies = false; /* the last PrepareLook's look met a limit or rate limit */
/* The keyed queues the last PrepareLook's look may claim from (LaneQueues). */
const char **lane_queues = nullptr;
int nlane_queues = 0;
TimestampTz next_token_at = 0; /* when the last PrepareLook's emptiest bucket has a token again, 0: none */

/* What one look allocates (filters taken apart, the blocked lists, a
 * recount's ids): reset by the next PrepareLook, so that a long poll's many
 * looks do not pile it up. */
MemoryContext look_context = nullptr;

/* Queues this transaction noted as keyed (NoteKeyed), by a hash of the
 * name, each with the names of that hash, in TopTransactionContext: a
 * batch of keyed jobs into many new queues writes each queue once and never
 * reads the controls again for rows it wrote itself. Forgotten at the end
 * of the transaction, and whole at a subtransaction's rollback (which may
 * have undone a write). */
struct NotedQueue {
	uint64 hash;
	List *names; /* of text */
};
HTAB *noted_keyed = nullptr;

/* Places and tokens this transaction took, to give back if it rolls back. */
struct Taken {
	int counter;
	int64 job_id; /* 0: tokens of a rate limit */
	pg_uuid_t token;
	int level;
	int32 weight;    /* the tokens taken */
	uint64 key_hash; /* tokens of the bucket of this key (the counter's rate limit per key), 0: its own */
};
Taken *taken = nullptr;
int ntaken = 0;
int taken_room = 0;

bool
SameText(Datum value, const char *s, int len)
{
	const text *t = DatumGetTextPP(value);
	return VARSIZE_ANY_EXHDR(t) == static_cast<Size>(len) && memcmp(VARDATA_ANY(t), s, len) == 0;
}

/* The controls are sorted by queue (bytes, then length), so that the
 * controls of one queue are found by a binary search instead of a pass
 * over all of them: a claim, a row passed over, a key looked at cost as
 * much beside 10,000 controls as beside 10. */
int
CompareQueues(const char *a, int a_len, const char *b, int b_len)
{
	int c = memcmp(a, b, Min(a_len, b_len));
	return c != 0 ? c : (a_len > b_len) - (a_len < b_len);
}

int
CompareControls(const void *a, const void *b)
{
	const auto *x = static_cast<const Control *>(a), *y = static_cast<const Control *>(b);
	return CompareQueues(x->queue, x->queue_len, y->queue, y->queue_len);
}

int
CompareIds(const void *a, const void *b)
{
	int64 x = (*static_cast<const Control *const *>(a))->id, y = (*static_cast<const Control *const *>(b))->id;
	return (x > y) - (x < y);
}

/* The controls of one queue: controls[lo] to controls[hi - 1]. */
struct ControlRange {
	int lo;
	int hi;
};

ControlRange
RangeOf(const char *queue, int len)
{
	int lo = 0, hi = ncontrols;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (CompareQueues(controls[mid].queue, controls[mid].queue_len, queue, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int end = lo;
	while (end < ncontrols && CompareQueues(controls[end].queue, controls[end].queue_len, queue, len) == 0)
		end++;
	return ControlRange{lo, end};
}

ControlRange
RangeOf(Datum queue)
{
	const text *t = DatumGetTextPP(queue);
	return RangeOf(VARDATA_ANY(t), static_cast<int>(VARSIZE_ANY_EXHDR(t)));
}

/* A pickup's job_types or queues filter, taken apart once per look. */
struct Filter {
	Datum *elems = nullptr;
	bool *nulls = nullptr;
	int count = -1; /* -1: any */

	explicit Filter(ArrayType *array)
	{
		if (array != nullptr)
			deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
	}

	bool Has(const char *s, int len) const
	{
		if (count < 0)
			return true;
		for (int i = 0; i < count; i++)
			if (!nulls[i] && SameText(elems[i], s, len))
				return true;
		return false;
	}
};

/* CounterIs answers whether counter `i` is control `id`'s; lock held. */
bool
CounterIs(int i, int64 id)
{
	return i >= 0 && i < kMaxCounters && shared->counters[i].dboid == MyDatabaseId &&
	       shared->counters[i].control_id == id;
}

/* AddPlace chains a place into counter `i`; lock held exclusively, a free
 * place available. */
void
AddPlace(int i, int64 job_id, const pg_uuid_t &token, TransactionId xid, uint64 key_hash)
{
	int32 p = shared->free_list[--shared->nfree];
	shared->places[p] = Place{i, shared->counters[i].head, job_id, token, xid, key_hash};
	shared->counters[i].head = p;
	shared->counters[i].used++;
}

bool
SameToken(const pg_uuid_t &a, const pg_uuid_t &b)
{
	return memcmp(a.data, b.data, UUID_LEN) == 0;
}

/* The token of a place whose claim's token is not known yet: a prepared
 * transaction's, loaded from the READY row it holds. Its place counts while
 * the job is RUNNING under any lease. */
constexpr pg_uuid_t kAnyLease{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                               0xff, 0xff}};

/* TokenCol reads a lease token column of the last SPI result (zeros for
 * NULL, as for a claim that has none). */
pg_uuid_t
TokenCol(uint64 row, int col)
{
	bool isnull;
	Datum d = spi::Col(row, col, &isnull);
	pg_uuid_t token{};
	if (!isnull)
		token = *DatumGetUUIDP(d);
	return token;
}

/* RemovePlace unchains the place of counter `i` matching (job_id, token,
 * xid), if any; lock held exclusively. */
void
RemovePlace(int i, int64 job_id, const pg_uuid_t &token, TransactionId xid)
{
	for (int32 *link = &shared->counters[i].head; *link >= 0; link = &shared->places[*link].next) {
		Place &p = shared->places[*link];
		if (p.job_id == job_id && SameToken(p.token, token) && p.xid == xid) {
			int32 freed = *link;
			*link = p.next;
			p.counter = -1;
			shared->free_list[shared->nfree++] = freed;
			shared->counters[i].used--;
			return;
		}
	}
}

/* FreeKeyBuckets forgets the buckets of this database's keys for which
 * `gone(control_id)` holds; lock held exclusively. */
template <typename Gone>
void
FreeKeyBuckets(Gone gone)
{
	for (KeyBucket &b : shared->key_buckets)
		if (b.dboid == MyDatabaseId && gone(b.control_id))
			b.dboid = InvalidOid;
}

/* FreePlaces gives the places of counter `i` back, which then counts
 * none until a limit loads them again; lock held exclusively. */
void
FreePlaces(int i)
{
	Counter &k = shared->counters[i];
	for (int32 p = k.head; p >= 0;) {
		int32 next = shared->places[p].next;
		shared->places[p].counter = -1;
		shared->free_list[shared->nfree++] = p;
		p = next;
	}
	k.head = -1;
	k.used = 0;
	k.placed = false;
}

/* FreeCounter gives counter `i`, its places and its keys' buckets back;
 * lock held exclusively. */
void
FreeCounter(int i)
{
	FreePlaces(i);
	int64 id = shared->counters[i].control_id;
	FreeKeyBuckets([id](int64 control_id) { return control_id == id; });
	shared->counters[i] = kFreeCounter;
}

/* Counted answers whether control `c` keeps a Counter: a limit or a rate
 * (the counter of a rate limit per key names its buckets). */
bool
Counted(const Control &c)
{
	return c.max_running >= 0 || c.rate > 0 || c.max_per_key >= 0 || c.rate_per_key > 0;
}

/* Placed answers whether control `c` counts places: a limit, of the queue
 * or of each of its keys. */
bool
Placed(const Control &c)
{
	return c.max_running >= 0 || c.max_per_key >= 0;
}

/* KeyHash identifies a concurrency key in the places (0: no key). */
uint64
KeyHash(Datum key)
{
	const text *t = DatumGetTextPP(key);
	uint64 h = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(t)),
	                               static_cast<int>(VARSIZE_ANY_EXHDR(t)), 0);
	return h == 0 ? 1 : h;
}

/* KeyUsed counts the places of counter `i` taken by jobs of the key
 * `key_hash`; lock held. */
int32
KeyUsed(int i, uint64 key_hash)
{
	int32 n = 0;
	for (int32 p = shared->counters[i].head; p >= 0; p = shared->places[p].next)
		n += shared->places[p].key_hash == key_hash;
	return n;
}

/* QueueRow answers whether control `c` is a queue's own (no job type, no key). */
bool
QueueRow(const Control &c)
{
	return c.job_type == nullptr && c.key == nullptr;
}

/* Refilled answers what a bucket that held `tokens` at `since` holds at
 * `now`, refilled at `rate` per second, at most `burst`. */
double
Refilled(double tokens, TimestampTz since, double rate, int32 burst, TimestampTz now)
{
	double refill = now > since ? rate * static_cast<double>(now - since) / USECS_PER_SEC : 0;
	return Min(static_cast<double>(burst), tokens + refill);
}

/* Tokens answers the bucket of rate limit `c` as of `now`. */
double
Tokens(const Counter &k, const Control &c, TimestampTz now)
{
	return Refilled(k.tokens, k.refilled_at, c.rate, c.burst, now);
}

/* NoteEmpty notes that a bucket filling at `rate` had `tokens` at `now`,
 * fewer than one: a waiter sleeps until it has one again (NextTokenAt). */
void
NoteEmpty(double rate, double tokens, TimestampTz now)
{
	/* At most an hour ahead (a tiny rate's next token, or one after a heavy
	 * job's debt, may be centuries away): the waiter looks again then. */
	double wait_us = Min((1 - tokens) / rate * USECS_PER_SEC, static_cast<double>(USECS_PER_HOUR));
	TimestampTz at = now + static_cast<int64>(wait_us) + 1;
	next_token_at = next_token_at == 0 ? at : Min(next_token_at, at);
}

/* Refill brings rate limit `c`'s bucket up to `now`; lock held exclusively. */
void
Refill(Counter &k, const Control &c, TimestampTz now)
{
	k.tokens = Tokens(k, c, now);
	k.refilled_at = Max(k.refilled_at, now);
}

/* ProbeStart answers the first slot of the probe for the bucket of key
 * `key_hash` under rate limit per key `control_id`. */
int
ProbeStart(int64 control_id, uint64 key_hash)
{
	return static_cast<int>((key_hash ^ (static_cast<uint64>(control_id) * UINT64CONST(0x9E3779B97F4A7C15))) %
	                        kMaxKeyBuckets);
}

/* FindKeyBucket answers the slot of the bucket of key `key_hash` under
 * rate limit per key `control_id`, -1 when it has none (a full bucket);
 * lock held. */
int
FindKeyBucket(int64 control_id, uint64 key_hash)
{
	int start = ProbeStart(control_id, key_hash);
	for (int i = 0; i < kKeyProbe; i++) {
		int slot = (start + i) % kMaxKeyBuckets;
		const KeyBucket &b = shared->key_buckets[slot];
		if (b.dboid == MyDatabaseId && b.control_id == control_id && b.key_hash == key_hash)
			return slot;
	}
	return -1;
}

/* KeyTokens answers the tokens of key `key_hash`'s bucket under queue
 * control `c`'s rate limit per key as of `now`; lock held. */
double
KeyTokens(const Control &c, uint64 key_hash, TimestampTz now)
{
	int slot = FindKeyBucket(c.id, key_hash);
	if (slot < 0)
		return c.burst_per_key;
	const KeyBucket &b = shared->key_buckets[slot];
	return Refilled(b.tokens, b.refilled_at, c.rate_per_key, c.burst_per_key, now);
}

/* EnsureKeyBucket answers key `key_hash`'s bucket under queue control `c`'s
 * rate limit per key, refilled to `now`: a new one is full, in a free slot
 * of its probe or else in place of the fullest bucket there (which is
 * forgotten: its key starts again from a full bucket); lock held
 * exclusively. */
KeyBucket &
EnsureKeyBucket(const Control &c, uint64 key_hash, TimestampTz now)
{
	int slot = FindKeyBucket(c.id, key_hash);
	if (slot < 0) {
		int start = ProbeStart(c.id, key_hash);
		double fullest = -1;
		for (int i = 0; i < kKeyProbe && fullest < 2; i++) {
			int s = (start + i) % kMaxKeyBuckets;
			const KeyBucket &b = shared->key_buckets[s];
			/* A free slot (2) ends the search; a full bucket (1, the same as
			 * none) is taken unless a free slot follows. */
			double fill =
			    b.dboid == InvalidOid ? 2 : Refilled(b.tokens, b.refilled_at, b.rate, b.burst, now) / Max(b.burst, 1);
			if (fill > fullest) {
				fullest = fill;
				slot = s;
			}
		}
		shared->key_buckets[slot] =
		    KeyBucket{MyDatabaseId, c.id, key_hash, static_cast<double>(c.burst_per_key), now, 0, 0};
	}
	KeyBucket &b = shared->key_buckets[slot];
	b.rate = c.rate_per_key;
	b.burst = c.burst_per_key;
	b.tokens = Refilled(b.tokens, b.refilled_at, b.rate, b.burst, now);
	b.refilled_at = Max(b.refilled_at, now);
	return b;
}

/* FillControl copies row `r` of the last SPI result into `c`, its strings
 * in the current memory context. */
void
FillControl(Control &c, uint64 r)
{
	bool isnull;
	c.id = spi::ColInt64(r, 1);
	c.queue = spi::ColText(r, 2);
	c.queue_len = strlen(c.queue);
	c.job_type = spi::ColText(r, 3);
	c.job_type_len = c.job_type ? strlen(c.job_type) : 0;
	c.paused = spi::ColBool(r, 4);
	Datum max = spi::Col(r, 5, &isnull);
	c.max_running = isnull ? -1 : DatumGetInt32(max);
	Datum rate = spi::Col(r, 6, &isnull);
	c.rate = isnull ? 0 : DatumGetFloat8(rate);
	Datum burst = spi::Col(r, 7, &isnull);
	c.burst = isnull ? 1 : DatumGetInt32(burst);
	c.key = spi::ColText(r, 8);
	c.key_len = c.key ? strlen(c.key) : 0;
	Datum per_key = spi::Col(r, 9, &isnull);
	c.max_per_key = isnull ? -1 : DatumGetInt32(per_key);
	c.keyed = spi::ColBool(r, 10);
	Datum rate_per_key = spi::Col(r, 11, &isnull);
	c.rate_per_key = isnull ? 0 : DatumGetFloat8(rate_per_key);
	Datum burst_per_key = spi::Col(r, 12, &isnull);
	c.burst_per_key = isnull ? 1 : DatumGetInt32(burst_per_key);
	c.counter = -1;
}

void
FreeStrings(Control &c)
{
	pfree(c.queue);
	if (c.job_type)
		pfree(c.job_type);
	if (c.key)
		pfree(c.key);
}

/* Room makes the copy hold at least `n` controls. */
void
Room(int n)
{
	if (n <= controls_room)
		return;
	int room = Max(n, controls_room * 2);
	controls = static_cast<Control *>(controls ? repalloc(controls, sizeof(Control) * room)
	                                           : MemoryContextAlloc(TopMemoryContext, sizeof(Control) * room));
	controls_room = room;
}

/* LoadQuery runs `stmt` (with `values`) as committed now, search_path
 * pinned; 0 rows when pqrun.queue_control is not there (an install older
 * than the library, before its update). */
uint64
LoadQuery(spi::Statement &stmt, Datum *values)
{
	Oid namespace_id = get_namespace_oid("pqrun", true);
	Oid table = OidIsValid(namespace_id) ? get_relname_relid("queue_control", namespace_id) : InvalidOid;
	keys_installed = OidIsValid(table) && get_attnum(table, "keyed") != InvalidAttrNumber;
	if (!OidIsValid(table))
		return 0;
	int nest_level = guc::PinSearchPath();
	uint64 n = spi::ExecLatest(stmt, values, nullptr, true);
	guc::Unpin(nest_level);
	return n;
}

/* FreeGone frees, lock held exclusively, the counters (and key buckets) of
 * this database's controls for which `now_of(id)` answers nothing or a
 * control that no longer counts, and the places of those that no longer
 * place; `ours(id)` says which counters to look at. */
template <typename Ours, typename NowOf>
void
FreeGone(Ours ours, NowOf now_of)
{
	for (int i = 0; i < kMaxCounters; i++) {
		if (shared->counters[i].dboid != MyDatabaseId || !ours(shared->counters[i].control_id))
			continue;
		const Control *kept = now_of(shared->counters[i].control_id);
		if (kept == nullptr || !Counted(*kept))
			FreeCounter(i);
		else if (!Placed(*kept) && shared->counters[i].placed)
			FreePlaces(i); /* a limit removed, a rate kept: counted afresh when a limit comes back */
	}
	FreeKeyBuckets([&ours, &now_of](int64 control_id) {
		if (!ours(control_id))
			return false;
		const Control *c = now_of(control_id);
		return c == nullptr || c->rate_per_key <= 0;
	});
}

/* Reload copies pqrun.queue_control as of now, and frees the counters of
 * this database's limits that are gone. */
void
Reload(uint64 gen)
{
	for (int i = 0; i < ncontrols; i++)
		FreeStrings(controls[i]);
	ncontrols = nplaced = 0;
	cache_valid = false; /* until the copy is complete */
	uint64 n = LoadQuery(stmts::kLoadControls, nullptr);
	Room(static_cast<int>(n));
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	for (uint64 r = 0; r < n; r++) {
		Control &c = controls[ncontrols++];
		FillControl(c, r);
		nplaced += Placed(c);
	}
	if (ncontrols > 1)
		qsort(controls, ncontrols, sizeof(Control), CompareControls);
	MemoryContextSwitchTo(old);
	cache_valid = true;
	cache_gen = gen;
	cache_db = MyDatabaseId;
	/* What this transaction changed may still roll back: its counters
	 * stay. */
	if (changed_here || shared == nullptr)
		return;
	/* The controls by id, so that each counter and key bucket finds its own
	 * with a binary search while the lock is held. */
	const Control **by_id = static_cast<const Control **>(palloc(sizeof(Control *) * Max(ncontrols, 1)));
	for (int j = 0; j < ncontrols; j++)
		by_id[j] = &controls[j];
	qsort(by_id, ncontrols, sizeof(Control *), CompareIds);
	auto find = [by_id](int64 id) -> const Control * {
		int lo = 0, hi = ncontrols;
		while (lo < hi) {
			int mid = lo + (hi - lo) / 2;
			if (by_id[mid]->id < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		return lo < ncontrols && by_id[lo]->id == id ? by_id[lo] : nullptr;
	};
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	FreeGone([](int64) { return true; }, find);
	LWLockRelease(shared->lock);
	pfree(by_id);
}

/* Patch reads the controls of `queue` (`len` bytes) again as of now, in
 * place of those the copy holds, and frees the counters of those of them
 * that are gone: a change of one queue's controls costs one descent of
 * queue_control_key, however many controls there are. */
void
Patch(const char *queue, int len)
{
	Datum values[1] = {PointerGetDatum(cstring_to_text_with_len(queue, len))};
	uint64 n = LoadQuery(stmts::kLoadQueueControls, values);
	ControlRange range = RangeOf(queue, len);
	int nold = range.hi - range.lo;
	/* The controls it replaces, strings and all, until their counters are
	 * seen to. */
	Control *old_rows = static_cast<Control *>(palloc(sizeof(Control) * Max(nold, 1)));
	memcpy(old_rows, &controls[range.lo], sizeof(Control) * nold);
	cache_valid = false; /* until the copy is whole again */
	Room(ncontrols - nold + static_cast<int>(n));
	memmove(&controls[range.lo + n], &controls[range.hi], sizeof(Control) * (ncontrols - range.hi));
	ncontrols += static_cast<int>(n) - nold;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	for (uint64 r = 0; r < n; r++) {
		FillControl(controls[range.lo + r], r);
		nplaced += Placed(controls[range.lo + r]);
	}
	MemoryContextSwitchTo(old);
	for (int j = 0; j < nold; j++)
		nplaced -= Placed(old_rows[j]);
	cache_valid = true;
	if (!changed_here && shared != nullptr && nold > 0) {
		const Control *now_rows = &controls[range.lo];
		int nnow = static_cast<int>(n);
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		FreeGone(
		    [old_rows, nold](int64 id) {
			    for (int j = 0; j < nold; j++)
				    if (old_rows[j].id == id)
					    return true;
			    return false;
		    },
		    [now_rows, nnow](int64 id) -> const Control * {
			    for (int j = 0; j < nnow; j++)
				    if (now_rows[j].id == id)
					    return &now_rows[j];
			    return nullptr;
		    });
		LWLockRelease(shared->lock);
	}
	for (int j = 0; j < nold; j++)
		FreeStrings(old_rows[j]);
	pfree(old_rows);
}

/* EnsureCounter finds or makes control `c`'s counter, loading a limit's
 * places from the RUNNING rows as committed (nobody has counted in it yet,
 * so every claim that counts is one of those), and starting a rate limit
 * with a full bucket. A limit added to a rate limit's counter loads its
 * places then. -1 when there is no room. */
int
EnsureCounter(const Control &c)
{
	LWLockAcquire(shared->lock, LW_SHARED);
	int found = -1;
	for (int i = 0; i < kMaxCounters && found < 0; i++)
		if (CounterIs(i, c.id))
			found = i;
	bool ready = found >= 0 && (shared->counters[found].placed || !Placed(c));
	LWLockRelease(shared->lock);
	if (ready)
		return found;
	found = -1;

	uint64 n = 0;
	if (Placed(c)) {
		const char *second = c.key ? c.key : c.job_type;
		int nest_level = guc::PinSearchPath();
		Datum db = ObjectIdGetDatum(MyDatabaseId);
		spi::ExecLatest(stmts::kPreparedHere, &db, nullptr, true);
		bool none_prepared;
		Datum prepared = spi::Col(0, 1, &none_prepared);
		if (!none_prepared)
			prepared = PointerGetDatum(PG_DETOAST_DATUM_COPY(prepared));
		Datum values[3] = {PointerGetDatum(cstring_to_text_with_len(c.queue, c.queue_len)),
		                   second ? PointerGetDatum(cstring_to_text(second)) : Datum(0), prepared};
		char nulls[4] = {' ', second ? ' ' : 'n', none_prepared ? 'n' : ' ', '\0'};
		n = spi::ExecLatest(c.key ? stmts::kLoadRunningKey : stmts::kLoadRunning, values, nulls, false);
		guc::Unpin(nest_level);
	}
	bool with_keys = n > 0 && SPI_tuptable->tupdesc->natts >= 4;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	int free_counter = -1;
	for (int i = 0; i < kMaxCounters && found < 0; i++) {
		if (CounterIs(i, c.id))
			found = i;
		else if (free_counter < 0 && shared->counters[i].dboid == InvalidOid)
			free_counter = i;
	}
	/* Someone else loaded it meanwhile, or no room: a limit that cannot be
	 * counted lets nothing run. */
	if (found < 0 && free_counter >= 0 && static_cast<uint64>(shared->nfree) >= n) {
		found = free_counter;
		TimestampTz now = GetCurrentTimestamp();
		shared->counters[found] =
		    Counter{MyDatabaseId, c.id, 0, -1, false, false, now, static_cast<double>(c.burst), now};
	} else if (found >= 0 && !shared->counters[found].placed && Placed(c) && static_cast<uint64>(shared->nfree) < n) {
		found = -1;
	}
	if (found >= 0 && !shared->counters[found].placed && Placed(c)) {
		shared->counters[found].placed = true;
		for (uint64 r = 0; r < n; r++) {
			bool isnull = true;
			Datum key = with_keys ? spi::Col(r, 4, &isnull) : Datum(0);
			bool committed;
			Datum prepared = spi::Col(r, 3, &committed);
			AddPlace(found, spi::ColInt64(r, 1), committed ? TokenCol(r, 2) : kAnyLease,
			         committed ? InvalidTransactionId : DatumGetTransactionId(prepared), isnull ? 0 : KeyHash(key));
		}
	}
	LWLockRelease(shared->lock);
	if (found < 0)
		ereport(WARNING, (errmsg("pqrun: no room in shared memory to count the limits of queue \"%s\"", c.queue),
		                  errdetail("Its jobs are not picked up until other limits are removed.")));
	return found;
}

/* Verify gives back the places of `counter` whose jobs are no longer
 * RUNNING under the counted lease, as a snapshot taken after their claims
 * ended shows them: kVerifyPlaces of them at a time, from where the last
 * recount stopped, so that a look costs as much beside 10,000 places as
 * beside 256 (a run that ended and told, NoteEnded, gives its place back at
 * once; only those that did not wait for the recounts to come round to
 * them). What this transaction itself changed does not count (it may still
 * roll back): a job it finished keeps its place until it commits, and
 * AtCommit has the places looked at again. */
constexpr int kVerifyPlaces = 256;

void
Verify(int counter, int64 id)
{
	int64 *ids = static_cast<int64 *>(palloc(sizeof(int64) * kVerifyPlaces));
	pg_uuid_t *tokens = static_cast<pg_uuid_t *>(palloc(sizeof(pg_uuid_t) * kVerifyPlaces));
	TransactionId *xids = static_cast<TransactionId *>(palloc(sizeof(TransactionId) * kVerifyPlaces));
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (!CounterIs(counter, id)) {
		LWLockRelease(shared->lock);
		return;
	}
	Counter &k = shared->counters[counter];
	if (k.verify_from >= k.used)
		k.verify_from = 0;
	int32 p = k.head;
	for (int32 skipped = 0; p >= 0 && skipped < k.verify_from; skipped++)
		p = shared->places[p].next;
	int taken_places = 0;
	for (; p >= 0 && taken_places < kVerifyPlaces; p = shared->places[p].next) {
		const Place &place = shared->places[p];
		ids[taken_places] = place.job_id;
		tokens[taken_places] = place.token;
		xids[taken_places] = place.xid;
		taken_places++;
	}
	/* A recount that reached the end of the chain has looked at them all. */
	if (p < 0) {
		k.verify_from = 0;
		k.dirty = false;
	} else {
		k.verify_from += taken_places;
	}
	k.verified_at = GetCurrentTimestamp();
	LWLockRelease(shared->lock);
	/* A claim still in progress counts, whatever its row shows (asked
	 * without the lock: the answer may read pg_subtrans). */
	int n = 0;
	for (int i = 0; i < taken_places; i++) {
		if (TransactionIdIsValid(xids[i]) && TransactionIdIsInProgress(xids[i]))
			continue;
		ids[n] = ids[i];
		tokens[n] = tokens[i];
		xids[n] = xids[i];
		n++;
	}
	if (n == 0)
		return;

	Datum values[1] = {spi::Int8Array(ids, n)};
	int nest_level = guc::PinSearchPath();
	uint64 running = spi::ExecLatest(stmts::kStillRunning, values, nullptr, false);
	guc::Unpin(nest_level);
	bool *gone = static_cast<bool *>(palloc(sizeof(bool) * n));
	for (int i = 0; i < n; i++)
		gone[i] = true;
	for (uint64 r = 0; r < running; r++) {
		int64 job = spi::ColInt64(r, 1);
		pg_uuid_t token = TokenCol(r, 2);
		for (int i = 0; i < n; i++)
			if (ids[i] == job && (SameToken(tokens[i], token) || SameToken(tokens[i], kAnyLease)))
				gone[i] = false;
	}
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (CounterIs(counter, id)) {
		int removed = 0;
		for (int i = 0; i < n; i++)
			if (gone[i]) {
				RemovePlace(counter, ids[i], tokens[i], xids[i]);
				removed++;
			}
		/* The places after those removed moved up the chain. */
		Counter &after = shared->counters[counter];
		after.verify_from = Max(0, after.verify_from - removed);
	}
	LWLockRelease(shared->lock);
}

/* Refresh makes sure control `c` is counted and, when its limit has no
 * room for `want` more jobs, gives back the places of jobs that ended; when
 * its rate limit has no token, notes when it will have one. */
void
Refresh(Control &c, int32 want)
{
	if (c.counter < 0 || !CounterIs(c.counter, c.id)) /* read without the lock: rechecked below */
		c.counter = EnsureCounter(c);
	if (c.counter < 0) {
		limited_look = true;
		return;
	}
	if (c.rate > 0) {
		TimestampTz now = GetCurrentTimestamp();
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		double tokens = -1;
		if (CounterIs(c.counter, c.id)) {
			Refill(shared->counters[c.counter], c, now);
			tokens = shared->counters[c.counter].tokens;
		}
		LWLockRelease(shared->lock);
		if (tokens < 1)
			NoteEmpty(c.rate, tokens, now);
	}
	if (c.max_running < 0)
		return;
	LWLockAcquire(shared->lock, LW_SHARED);
	bool counted = CounterIs(c.counter, c.id);
	const Counter &k = shared->counters[c.counter];
	bool full = !counted || k.used >= c.max_running;
	bool short_of_room = !counted || k.used > c.max_running - want;
	bool due = counted && (k.dirty || TimestampDifferenceExceeds(k.verified_at, GetCurrentTimestamp(), kVerifyEveryMs));
	LWLockRelease(shared->lock);
	if (short_of_room && due) {
		Verify(c.counter, c.id);
		LWLockAcquire(shared->lock, LW_SHARED);
		full = !CounterIs(c.counter, c.id) || shared->counters[c.counter].used >= c.max_running;
		LWLockRelease(shared->lock);
	}
	if (full)
		limited_look = true;
}

/* Full answers, without the lock, whether limit `c` looks full or its
 * rate limit has no token. */
bool
Full(const Control &c)
{
	if (!Counted(c))
		return false;
	if (c.counter < 0)
		return true;
	const Counter &k = shared->counters[c.counter];
	if (k.control_id != c.id || (c.max_running >= 0 && k.used >= c.max_running))
		return true;
	if (c.rate > 0) {
		TimestampTz now = GetCurrentTimestamp();
		double tokens = Tokens(k, c, now);
		if (tokens < 1) {
			NoteEmpty(c.rate, tokens, now);
			return true;
		}
	}
	return false;
}

/* Matches answers whether control `c` covers a job of (queue, job_type,
 * key); key 0: none. */
bool
Matches(const Control &c, Datum queue, Datum job_type, Datum key = Datum(0))
{
	return SameText(queue, c.queue, c.queue_len) &&
	       (c.job_type == nullptr || SameText(job_type, c.job_type, c.job_type_len)) &&
	       (c.key == nullptr || (key != Datum(0) && SameText(key, c.key, c.key_len)));
}

/* OwnKeyControls answers whether key `key` of `queue` has a limit and a
 * rate limit of its own, which replace the queue's limit and rate limit
 * per key. */
void
OwnKeyControls(Datum queue, Datum key, bool *limit, bool *rate)
{
	*limit = *rate = false;
	ControlRange range = RangeOf(queue);
	for (int i = range.lo; i < range.hi; i++) {
		const Control &c = controls[i];
		if (c.key != nullptr && SameText(key, c.key, c.key_len) && SameText(queue, c.queue, c.queue_len)) {
			*limit = *limit || c.max_running >= 0;
			*rate = *rate || c.rate > 0;
		}
	}
}

/* NamesOf answers, made in look_context, the text[] of name(c) for every
 * control for which it is not nullptr (the name is made there too), and
 * how many in `count` when given. */
template <typename Name>
Datum
NamesOf(Name name, int *count = nullptr)
{
	MemoryContext caller = MemoryContextSwitchTo(look_context);
	Datum *elems = static_cast<Datum *>(palloc(sizeof(Datum) * (ncontrols + 1)));
	int n = 0;
	for (int i = 0; i < ncontrols; i++)
		if (const char *s = name(controls[i]))
			elems[n++] = CStringGetTextDatum(s);
	Datum array = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	MemoryContextSwitchTo(caller);
	if (count)
		*count = n;
	return array;
}

/* GiveBack gives back the places this transaction took at nesting level
 * `level` or deeper. */
void
GiveBack(int level)
{
	if (ntaken == 0 || shared == nullptr)
		return;
	TransactionId xid = GetTopTransactionIdIfAny();
	int kept = 0;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < ntaken; i++) {
		const Taken &t = taken[i];
		if (t.level < level) {
			taken[kept++] = t;
			continue;
		}
		Counter &k = shared->counters[t.counter];
		if (k.dboid != MyDatabaseId)
			continue;
		/* Tokens above the burst for a moment at most: the next refill caps them. */
		if (t.job_id != 0) {
			RemovePlace(t.counter, t.job_id, t.token, xid);
		} else if (t.key_hash == 0) {
			k.tokens += t.weight;
		} else {
			int slot = FindKeyBucket(k.control_id, t.key_hash);
			if (slot >= 0) /* else forgotten, as good as full */
				shared->key_buckets[slot].tokens += t.weight;
		}
	}
	LWLockRelease(shared->lock);
	ntaken = kept;
}

} // namespace

/* NotedHere answers whether this transaction noted `queue` as keyed, and
 * notes it when `note`. */
bool
NotedHere(Datum queue, bool note)
{
	if (noted_keyed == nullptr) {
		if (!note)
			return false;
		HASHCTL ctl{};
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(NotedQueue);
		ctl.hcxt = TopTransactionContext;
		noted_keyed = hash_create("pqrun keyed queues noted", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	text *name = DatumGetTextPP(queue);
	int len = VARSIZE_ANY_EXHDR(name);
	uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char *>(VARDATA_ANY(name)), len, 0);
	bool found;
	auto *entry = static_cast<NotedQueue *>(hash_search(noted_keyed, &hash, note ? HASH_ENTER : HASH_FIND, &found));
	if (entry == nullptr)
		return false;
	if (!found)
		entry->names = NIL;
	ListCell *lc;
	foreach (lc, entry->names) {
		const text *seen = static_cast<const text *>(lfirst(lc));
		if (VARSIZE_ANY_EXHDR(seen) == static_cast<Size>(len) && memcmp(VARDATA_ANY(seen), VARDATA_ANY(name), len) == 0)
			return true;
	}
	if (note) {
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
		entry->names = lappend(entry->names, cstring_to_text_with_len(VARDATA_ANY(name), len));
		MemoryContextSwitchTo(old);
	}
	return false;
}

/* KeysInstalled answers whether pqrun.queue_control has the columns of
 * keys (0.10.0). */
bool
KeysInstalled()
{
	Oid namespace_id = get_namespace_oid("pqrun", true);
	Oid table = OidIsValid(namespace_id) ? get_relname_relid("queue_control", namespace_id) : InvalidOid;
	return OidIsValid(table) && get_attnum(table, "keyed") != InvalidAttrNumber;
}

/* EnsureCache brings this backend's copy of the controls up to date: the
 * queues whose controls the commits since the copy changed, and those this
 * transaction changed, are read again; the whole table only when the
 * database's ring of changes no longer tells which (wake.hpp). */
void
EnsureCache()
{
	bool whole = !cache_valid || cache_db != MyDatabaseId || (changed_here && own_overflow);
	wake::ChangedQueues changed;
	uint64 gen = wake::ControlsChangedSince(whole ? wake::kNoControlsGen : cache_gen, &changed);
	if (whole || gen == wake::kNoControlsGen || (gen != cache_gen && changed.count < 0)) {
		Reload(gen);
	} else {
		for (int i = 0; i < changed.count; i++)
			Patch(changed.names[i], changed.lens[i]);
		cache_gen = gen;
		if (own_read == own_seq)
			return;
		for (int i = 0; i < nown; i++)
			Patch(own_names[i], own_lens[i]);
	}
	own_read = own_seq;
	if (!changed_here) {
		/* What the last transaction changed is now read as it ended. */
		for (int i = 0; i < nown; i++)
			pfree(own_names[i]);
		nown = 0;
	}
}

bool
PrepareLook(ArrayType *job_types, ArrayType *queues, int32 want)
{
	limited_look = skipped = held_back = false;
	next_token_at = 0;
	nlane_queues = 0;
	if (look_context == nullptr)
		look_context = AllocSetContextCreate(TopMemoryContext, "pqrun flow control", ALLOCSET_SMALL_SIZES);
	MemoryContextReset(look_context);
	MemoryContext caller_context = MemoryContextSwitchTo(look_context);
	EnsureCache();
	bool applies = false;
	counted_applies = false;
	Filter types(ncontrols > 0 ? job_types : nullptr), names(ncontrols > 0 ? queues : nullptr);
	lane_queues = static_cast<const char **>(palloc(sizeof(char *) * (ncontrols + 1)));
	for (int i = 0; i < ncontrols; i++) {
		Control &c = controls[i];
		if (!names.Has(c.queue, c.queue_len) || (c.job_type != nullptr && !types.Has(c.job_type, c.job_type_len)))
			continue;
		/* A paused queue's lanes have nothing to claim. */
		if (c.keyed && !(c.paused && shared != nullptr))
			lane_queues[nlane_queues++] = c.queue;
		/* Without shared memory nothing is enforced, but keyed jobs are in
		 * their lanes; a keyed mark alone holds nothing back. */
		if (shared == nullptr || !(c.paused || Counted(c)))
			continue;
		applies = true;
		if (Counted(c)) {
			counted_applies = true;
			Refresh(c, want);
		}
	}
	MemoryContextSwitchTo(caller_context);
	return applies;
}

bool
PausesOnly()
{
	return !counted_applies;
}

int
LaneQueues(const char *const **names)
{
	*names = lane_queues;
	return nlane_queues;
}

void
NoteKeyed(Datum queue)
{
	if (NotedHere(queue, false))
		return;
	/* Before reading the mark, which maintenance may be clearing
	 * (keyed_queues.hpp). */
	keyed_queues::LockShared(queue);
	if (!KeysInstalled())
		ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("concurrency keys need pqrun 0.10.0"),
		                errhint("Run ALTER EXTENSION pqrun UPDATE.")));
	/* The controls as committed tell whether the queue is keyed already;
	 * under a transaction snapshot (REPEATABLE READ), as committed now, not
	 * as of the snapshot, which a clearing may have committed after. Once
	 * this transaction has changed them, the copy would be read again for
	 * every queue it notes (its own writes may still roll back): the write,
	 * which changes nothing for a keyed queue, is cheaper. */
	if (!changed_here && IsolationUsesXactSnapshot()) {
		Datum values[1] = {queue};
		if (spi::ExecLatest(stmts::kMarked, values, nullptr, true) > 0) {
			(void)NotedHere(queue, true);
			return;
		}
	} else if (!changed_here) {
		EnsureCache();
		ControlRange range = RangeOf(queue);
		for (int i = range.lo; i < range.hi; i++)
			if (controls[i].keyed && SameText(queue, controls[i].queue, controls[i].queue_len)) {
				(void)NotedHere(queue, true);
				return;
			}
	}
	Datum values[1] = {queue};
	if (spi::Exec(stmts::kNoteKeyed, values, nullptr, SPI_OK_INSERT) > 0)
		NoteChanged();
	(void)NotedHere(queue, true);
}

bool
Blocked(Datum queue, Datum job_type)
{
	ControlRange range = RangeOf(queue);
	for (int i = range.lo; i < range.hi; i++) {
		const Control &c = controls[i];
		if (Matches(c, queue, job_type) && (c.paused || Full(c)))
			return skipped = held_back = true;
	}
	return false;
}

bool
Reserve(Datum queue, Datum job_type, Datum key, int32 weight, int64 job_id, const pg_uuid_t *token)
{
	/* The queue's, the job type's and the key's own control, at most. */
	constexpr int kMaxLimits = 3;
	const Control *limits[kMaxLimits];
	int nlimits = 0;
	uint64 key_hash = key != Datum(0) ? KeyHash(key) : 0;
	bool per_key = false;      /* the queue's limit per key applies */
	bool per_key_rate = false; /* the queue's rate limit per key applies */
	ControlRange range = RangeOf(queue);
	for (int i = range.lo; i < range.hi; i++) {
		const Control &c = controls[i];
		if (!Matches(c, queue, job_type, key))
			continue;
		if (c.paused)
			return !(skipped = held_back = true);
		if (Counted(c)) {
			if (nlimits == kMaxLimits || c.counter < 0)
				return !(skipped = held_back = true);
			limits[nlimits++] = &c;
			per_key = per_key || (c.max_per_key >= 0 && key_hash != 0);
			per_key_rate = per_key_rate || (c.rate_per_key > 0 && key_hash != 0);
		}
	}
	if (nlimits == 0)
		return true;
	if (per_key || per_key_rate) {
		bool own_limit, own_rate;
		OwnKeyControls(queue, key, &own_limit, &own_rate);
		per_key = per_key && !own_limit;
		per_key_rate = per_key_rate && !own_rate;
	}
	TransactionId xid = GetTopTransactionId();
	if (ntaken + 3 * nlimits > taken_room) {
		taken_room = Max(16, taken_room * 2);
		taken = static_cast<Taken *>(taken ? repalloc(taken, sizeof(Taken) * taken_room)
		                                   : MemoryContextAlloc(TopMemoryContext, sizeof(Taken) * taken_room));
	}
	bool ok = true;
	int level = GetCurrentTransactionNestLevel();
	TimestampTz now = GetCurrentTimestamp();
	KeyBucket *key_bucket = nullptr;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < nlimits && ok; i++) {
		const Control &c = *limits[i];
		ok = CounterIs(c.counter, c.id);
		if (ok && Placed(c))
			ok = shared->nfree >= nlimits;
		if (ok && c.max_running >= 0)
			ok = shared->counters[c.counter].used < c.max_running;
		if (ok && per_key && c.max_per_key >= 0)
			ok = KeyUsed(c.counter, key_hash) < c.max_per_key;
		if (ok && c.rate > 0) {
			Refill(shared->counters[c.counter], c, now);
			ok = shared->counters[c.counter].tokens >= 1;
			if (!ok)
				NoteEmpty(c.rate, shared->counters[c.counter].tokens, now);
		}
		if (ok && per_key_rate && c.rate_per_key > 0) {
			key_bucket = &EnsureKeyBucket(c, key_hash, now);
			ok = key_bucket->tokens >= 1;
			if (!ok)
				NoteEmpty(c.rate_per_key, key_bucket->tokens, now);
		}
	}
	if (ok) {
		for (int i = 0; i < nlimits; i++) {
			const Control &c = *limits[i];
			if (Placed(c)) {
				AddPlace(c.counter, job_id, *token, xid, key_hash);
				taken[ntaken++] = Taken{c.counter, job_id, *token, level, 0, 0};
			}
			if (c.rate > 0) {
				shared->counters[c.counter].tokens -= weight;
				taken[ntaken++] = Taken{c.counter, 0, pg_uuid_t{}, level, weight, 0};
			}
			if (per_key_rate && c.rate_per_key > 0) {
				key_bucket->tokens -= weight;
				taken[ntaken++] = Taken{c.counter, 0, pg_uuid_t{}, level, weight, key_hash};
			}
		}
	}
	LWLockRelease(shared->lock);
	skipped = skipped || !ok;
	held_back = held_back || !ok;
	return ok;
}

bool
QueueBlocked(Datum queue)
{
	if (shared == nullptr)
		return false;
	ControlRange range = RangeOf(queue);
	for (int i = range.lo; i < range.hi; i++) {
		Control &c = controls[i];
		if (c.job_type != nullptr || c.key != nullptr || !SameText(queue, c.queue, c.queue_len))
			continue;
		/* A resume wakes every waiter (its commit changes the controls); a
		 * place may come free by a path that wakes no one. */
		if (c.paused)
			return true;
		if (Full(c))
			return limited_look = true;
	}
	return false;
}

bool
KeyBlocked(Datum queue, Datum key, bool *by_limit)
{
	bool ignored;
	by_limit = by_limit ? by_limit : &ignored;
	*by_limit = false;
	if (shared == nullptr)
		return false;
	uint64 key_hash = KeyHash(key);
	bool own_limit, own_rate;
	OwnKeyControls(queue, key, &own_limit, &own_rate);
	ControlRange range = RangeOf(queue);
	for (int i = range.lo; i < range.hi; i++) {
		Control &c = controls[i];
		if (c.job_type != nullptr || !Matches(c, queue, Datum(0), key))
			continue;
		/* Not `skipped`: that is about the pick index, which has no keyed
		 * job. A resume wakes every waiter: no need to look again before. */
		if (c.paused)
			return true;
		if (Full(c)) {
			*by_limit = c.rate <= 0 && c.counter >= 0;
			return limited_look = true;
		}
		if (c.key != nullptr)
			continue;
		if (c.rate_per_key > 0 && !own_rate) {
			TimestampTz now = GetCurrentTimestamp();
			LWLockAcquire(shared->lock, LW_SHARED);
			double tokens = KeyTokens(c, key_hash, now);
			LWLockRelease(shared->lock);
			if (tokens < 1) {
				NoteEmpty(c.rate_per_key, tokens, now);
				return limited_look = true;
			}
		}
		if (own_limit || c.max_per_key < 0)
			continue;
		/* The queue's limit per key: counted from its places, looked at
		 * again as a limit without room is (Refresh). */
		for (int pass = 0;; pass++) {
			LWLockAcquire(shared->lock, LW_SHARED);
			bool counted = CounterIs(c.counter, c.id);
			const Counter &k = shared->counters[Max(c.counter, 0)];
			bool full = !counted || KeyUsed(c.counter, key_hash) >= c.max_per_key;
			bool due = counted &&
			           (k.dirty || TimestampDifferenceExceeds(k.verified_at, GetCurrentTimestamp(), kVerifyEveryMs));
			LWLockRelease(shared->lock);
			if (!full)
				break;
			if (pass > 0 || !due) {
				*by_limit = counted;
				return limited_look = true;
			}
			Verify(c.counter, c.id);
		}
	}
	return false;
}

Datum
BlockedQueues()
{
	int n;
	Datum names = NamesOf(
	    [](const Control &c) -> char * { return QueueRow(c) && (c.paused || Full(c)) ? c.queue : nullptr; }, &n);
	skipped = skipped || n > 0;
	return names;
}

Datum
BlockedPairs()
{
	/* The SQL picks match octet_length(queue) || ':' || queue || job_type. */
	int n;
	Datum names = NamesOf(
	    [](const Control &c) -> char * {
		    return c.job_type != nullptr && Full(c) ? psprintf("%d:%s%s", c.queue_len, c.queue, c.job_type) : nullptr;
	    },
	    &n);
	skipped = skipped || n > 0;
	return names;
}

Datum
ControlledQueues()
{
	return NamesOf([](const Control &c) -> char * { return c.queue; });
}

bool
Skipped()
{
	return skipped;
}

bool
HeldBack()
{
	return held_back;
}

void
NoteLimitedLook()
{
	limited_look = true;
}

bool
LimitedLook()
{
	return limited_look;
}

int
LimitedPollMs()
{
	return kLimitedPollMs;
}

TimestampTz
NextTokenAt()
{
	return next_token_at;
}

void
NoteEnded(const char *queue, const char *job_type, int64 job_id)
{
	if (nplaced == 0 || cache_db != MyDatabaseId || shared == nullptr)
		return;
	ControlRange range = RangeOf(queue, strlen(queue));
	bool limited = false;
	for (int i = range.lo; i < range.hi && !limited; i++)
		limited = Placed(controls[i]);
	if (!limited)
		return;
	wake::NoteFreed(queue, job_type);
	/* The places its claim took (in each limit that counts it), as they
	 * are now: a claim of the job made after this end is another. */
	int level = GetCurrentTransactionNestLevel();
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < kMaxCounters; i++) {
		if (shared->counters[i].dboid != MyDatabaseId)
			continue;
		for (int32 p = shared->counters[i].head; p >= 0; p = shared->places[p].next) {
			const Place &place = shared->places[p];
			if (place.job_id != job_id)
				continue;
			if (nended == kMaxEnded)
				ended_overflow = true;
			else
				ended[nended++] = Ended{i, job_id, place.token, place.xid, level};
		}
	}
	LWLockRelease(shared->lock);
}

void
NoteChanged()
{
	changed_here = true;
	if (!trigger_fired)
		NoteQueueChanged(nullptr, 0, true);
}

void
NoteQueueChanged(const char *queue, int len, bool wakes)
{
	changed_here = true;
	own_seq++;
	wake::NoteControlsChanged(queue, len, wakes);
	if (own_overflow)
		return;
	for (int i = 0; i < nown; i++)
		if (queue != nullptr && own_lens[i] == len && memcmp(own_names[i], queue, len) == 0)
			return;
	if (queue == nullptr || nown == kMaxOwn) {
		own_overflow = true;
		return;
	}
	own_names[nown] = static_cast<char *>(MemoryContextAlloc(TopMemoryContext, len));
	memcpy(own_names[nown], queue, len);
	own_lens[nown++] = len;
}

void
NoteTriggerFired()
{
	trigger_fired = true;
}

namespace {

/* Forget drops what the transaction that ends noted. */
void
Forget()
{
	if (changed_here) {
		/* Its changes are read again as they ended (EnsureCache). */
		own_seq++;
		if (own_overflow)
			cache_valid = false;
	}
	own_overflow = trigger_fired = false;
	ntaken = nended = 0;
	ended_overflow = changed_here = false;
	noted_keyed = nullptr; /* its memory goes with the transaction */
}

} // namespace

void
AtCommit()
{
	if ((nended > 0 || ended_overflow) && shared != nullptr) {
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < nended; i++)
			if (shared->counters[ended[i].counter].dboid == MyDatabaseId)
				RemovePlace(ended[i].counter, ended[i].job_id, ended[i].token, ended[i].xid);
		if (ended_overflow)
			for (Counter &k : shared->counters)
				if (k.dboid == MyDatabaseId)
					k.dirty = true;
		LWLockRelease(shared->lock);
	}
	Forget();
}

void
AtPrepare()
{
	Forget();
}

void
AtAbort()
{
	GiveBack(0);
	Forget();
}

void
AtSubAbort()
{
	noted_keyed = nullptr;
	own_seq++; /* what it changed is read again */
	int level = GetCurrentTransactionNestLevel();
	GiveBack(level);
	/* Its ends did not happen. */
	int kept = 0;
	for (int i = 0; i < nended; i++)
		if (ended[i].level < level)
			ended[kept++] = ended[i];
	nended = kept;
}

void
AtSubCommit()
{
	/* Its claims and ends now stand or fall with its parent. */
	int level = GetCurrentTransactionNestLevel();
	for (int i = 0; i < ntaken; i++)
		if (taken[i].level >= level)
			taken[i].level = level - 1;
	for (int i = 0; i < nended; i++)
		if (ended[i].level >= level)
			ended[i].level = level - 1;
}

void
Report(Tuplestorestate *out, TupleDesc desc)
{
	if (shared == nullptr)
		return;
	struct Row {
		int64 id;
		int32 used;
		double tokens;
		TimestampTz refilled_at;
	};
	Row rows[kMaxCounters];
	int n = 0;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const Counter &k : shared->counters)
		if (k.dboid == MyDatabaseId)
			rows[n++] = Row{k.control_id, k.used, k.tokens, k.refilled_at};
	LWLockRelease(shared->lock);
	for (int i = 0; i < n; i++) {
		Datum values[4] = {Int64GetDatum(rows[i].id), Int32GetDatum(rows[i].used), Float8GetDatum(rows[i].tokens),
		                   TimestampTzGetDatum(rows[i].refilled_at)};
		bool nulls[4] = {false, false, false, false};
		tuplestore_putvalues(out, desc, values, nulls);
	}
}

void
ReportKeyBuckets(Tuplestorestate *out, TupleDesc desc)
{
	if (shared == nullptr)
		return;
	struct Row {
		int64 id;
		int32 keys;
		int32 without_token;
	};
	Row rows[kMaxCounters];
	int n = 0;
	TimestampTz now = GetCurrentTimestamp();
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const KeyBucket &b : shared->key_buckets) {
		if (b.dboid != MyDatabaseId)
			continue;
		double tokens = Refilled(b.tokens, b.refilled_at, b.rate, b.burst, now);
		if (tokens >= b.burst)
			continue; /* full: as good as none */
		int i = 0;
		while (i < n && rows[i].id != b.control_id)
			i++;
		if (i == n) {
			if (n == kMaxCounters)
				continue; /* a bucket of a control gone meanwhile */
			rows[n++] = Row{b.control_id, 0, 0};
		}
		rows[i].keys++;
		rows[i].without_token += tokens < 1;
	}
	LWLockRelease(shared->lock);
	for (int i = 0; i < n; i++) {
		Datum values[3] = {Int64GetDatum(rows[i].id), Int32GetDatum(rows[i].keys), Int32GetDatum(rows[i].without_token)};
		bool nulls[3] = {false, false, false};
		tuplestore_putvalues(out, desc, values, nulls);
	}
}

void
ResetDatabase()
{
	cache_valid = false;
	if (shared == nullptr)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < kMaxCounters; i++)
		if (shared->counters[i].dboid == MyDatabaseId)
			FreeCounter(i);
	FreeKeyBuckets([](int64) { return true; });
	LWLockRelease(shared->lock);
}

void
KeepDatabases(const Oid *oids, int n)
{
	if (shared == nullptr)
		return;
	auto kept = [=](Oid dboid) { return shmem::Listed(oids, n, dboid); };
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < kMaxCounters; i++)
		if (shared->counters[i].dboid != InvalidOid && !kept(shared->counters[i].dboid))
			FreeCounter(i);
	for (KeyBucket &b : shared->key_buckets)
		if (b.dboid != InvalidOid && !kept(b.dboid))
			b.dboid = InvalidOid;
	LWLockRelease(shared->lock);
}

int
Usage(shmem::TableUsage out[3])
{
	out[0] = shmem::TableUsage{"limit_counters", 0, kMaxCounters};
	out[1] = shmem::TableUsage{"places", 0, kMaxPlaces};
	out[2] = shmem::TableUsage{"key_buckets", 0, kMaxKeyBuckets};
	if (shared == nullptr)
		return 3;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (const Counter &k : shared->counters)
		out[0].used += k.dboid != InvalidOid;
	out[1].used = kMaxPlaces - shared->nfree;
	for (const KeyBucket &b : shared->key_buckets)
		out[2].used += b.dboid != InvalidOid;
	LWLockRelease(shared->lock);
	return 3;
}

Size
ShmemSize()
{
	return MAXALIGN(sizeof(SharedPlaces));
}

void
ShmemInit()
{
	bool found;
	shared = static_cast<SharedPlaces *>(ShmemInitStruct("pqrun flow control", ShmemSize(), &found));
	if (!found) {
		shared->lock = shmem::LockOf(shmem::Lock::kPlaces);
		shared->nfree = kMaxPlaces;
		for (int i = 0; i < kMaxPlaces; i++) {
			shared->free_list[i] = kMaxPlaces - 1 - i;
			shared->places[i].counter = -1;
		}
		for (Counter &k : shared->counters)
			k = kFreeCounter;
		for (KeyBucket &b : shared->key_buckets)
			b.dboid = InvalidOid;
	}
}

} // namespace pqrun::flow_control
