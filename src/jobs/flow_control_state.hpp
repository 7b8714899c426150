/* src/jobs/flow_control_state.hpp — what the parts of flow control share
 * (flow_control.hpp is the interface): the tables in shared memory, this
 * backend's copy of pqrun.queue_control, and what the current transaction
 * and look took. Each part is one file:
 *   flow_control_places.cpp  the counters, places and key buckets in shared
 *                            memory: a limit's places loaded and recounted;
 *   flow_control_buckets.cpp the token buckets of the rate limits;
 *   flow_control_copy.cpp    this backend's copy of the controls, read again
 *                            by queue after a change, and the keyed marks;
 *   flow_control.cpp         a pickup's look: what applies, what is full,
 *                            and a claim's places and tokens reserved;
 *   flow_control_xact.cpp    what a transaction took or ended, given back
 *                            or kept at its end;
 *   flow_control_report.cpp  the rows behind pqrun.queue_controls.
 * One LWLock (shmem::Lock::kPlaces) guards the shared tables: it is taken
 * only by pickups of controlled queues, and held for list walks bounded by
 * the limit, never for I/O.
 */
#pragma once

#include "jobs/flow_control.hpp"
#include "pg/spi_plans.hpp"
#include "pg/spi_rows.hpp"

namespace pqrun::flow_control::detail {

constexpr int kMaxCounters = 256;
constexpr int kMaxPlaces = 16384;

/* A full limit is looked at again at most this often, unless a
 * transaction that ended more runs than it could note gave them back by
 * marking every limit (Counter::dirty). */
constexpr int kVerifyEveryMs = 20;

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

/* The queues whose controls this transaction changed, in TopMemoryContext:
 * the copy reads them again after each change (own_seq moved), which its
 * own uncommitted writes and a subtransaction's rollback make, and once
 * more after the transaction ended, committed or not. More than kMaxOwn
 * (own_overflow): the whole copy is read instead. */
constexpr int kMaxOwn = 64;

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

/* Places and tokens this transaction took, to give back if it rolls back. */
struct Taken {
	int counter;
	int64 job_id; /* 0: tokens of a rate limit */
	pg_uuid_t token;
	int level;
	int32 weight;    /* the tokens taken */
	uint64 key_hash; /* tokens of the bucket of this key (the counter's rate limit per key), 0: its own */
};

/* The controls of one queue: controls[lo] to controls[hi - 1]. */
struct ControlRange {
	int lo;
	int hi;
};

/* The token of a place whose claim's token is not known yet: a prepared
 * transaction's, loaded from the READY row it holds. Its place counts while
 * the job is RUNNING under any lease. */
constexpr pg_uuid_t kAnyLease{
    {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

/* ---- the counters, places and key buckets in shared memory (flow_control_places.cpp) */

extern SharedPlaces *shared;

bool CounterIs(int i, int64 id);

void AddPlace(int i, int64 job_id, const pg_uuid_t &token, TransactionId xid, uint64 key_hash);

void RemovePlace(int i, int64 job_id, const pg_uuid_t &token, TransactionId xid);

void FreePlaces(int i);

void FreeCounter(int i);

uint64 KeyHash(Datum key);

int32 KeyUsed(int i, uint64 key_hash);

int EnsureCounter(const Control &c);

void Verify(int counter, int64 id);

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

/* ---- this backend's copy of the controls (flow_control_copy.cpp) */

extern Control *controls;
extern int ncontrols;
extern bool cache_valid;
extern Oid cache_db;
extern int nplaced;       /* controls with a concurrency limit */
extern bool changed_here; /* this transaction changed the controls */
/* The trigger on pqrun.queue_control (0.19.0) told of this transaction's
 * changes, queue by queue: a write of an older install, without it, stands
 * for a change of every queue's controls. */
extern bool trigger_fired;
extern bool own_overflow;
extern uint64 own_seq;
extern HTAB *noted_keyed;

bool SameText(Datum value, const char *s, int len);

ControlRange RangeOf(const char *queue, int len);

ControlRange RangeOf(Datum queue);

bool Counted(const Control &c);

bool Placed(const Control &c);

bool QueueRow(const Control &c);

void EnsureCache();

/* ---- the current look (flow_control.cpp) */

extern TimestampTz next_token_at; /* when the last PrepareLook's emptiest bucket has a token again, 0: none */

/* ---- what the current transaction took and ended (flow_control_xact.cpp) */

extern Taken *taken;
extern int ntaken;
extern int taken_room;

/* ---- the token buckets (flow_control_buckets.cpp) */

double Refilled(double tokens, TimestampTz since, double rate, int32 burst, TimestampTz now);

double Tokens(const Counter &k, const Control &c, TimestampTz now);

void NoteEmpty(double rate, double tokens, TimestampTz now);

void Refill(Counter &k, const Control &c, TimestampTz now);

int FindKeyBucket(int64 control_id, uint64 key_hash);

double KeyTokens(const Control &c, uint64 key_hash, TimestampTz now);

KeyBucket &EnsureKeyBucket(const Control &c, uint64 key_hash, TimestampTz now);

} // namespace pqrun::flow_control::detail
