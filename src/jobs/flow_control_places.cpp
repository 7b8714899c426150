/* src/jobs/flow_control_places.cpp — the counters, places and key buckets
 * of flow control in shared memory: a limit's places loaded from the
 * RUNNING jobs when it is first needed and recounted when it looks full;
 * the tables' lifecycle (flow_control_state.hpp). */
#include "jobs/flow_control_state.hpp"

#include "guc.hpp"
#include "shmem/locks.hpp"
#include "shmem/shmem.hpp"

namespace pqrun::flow_control {

namespace stmts {

/* The runs a limit counts when its count starts: the RUNNING jobs as
 * committed, and the READY ones that a prepared transaction of the
 * database ($3, the ids of those transactions, NULL: none) holds, with it:
 * its claims, which only its COMMIT PREPARED shows as RUNNING, and which
 * after a restart nothing else remembers. */
#define PQRUN_LOAD_RUNNING(match)                                                                                      \
	"SELECT id, lease_token, NULL::xid AS xid" PQRUN_JOB_KEY                                                           \
	" FROM pqrun.job_live WHERE status = 'RUNNING' AND " match " UNION ALL SELECT id, NULL, xmax" PQRUN_JOB_KEY        \
	" FROM pqrun.job_live"                                                                                             \
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

/* Which of the counted claims still run. */
spi::Statement kStillRunning{"still running",
                             "SELECT id, lease_token FROM pqrun.job_live WHERE id = ANY ($1) AND status = 'RUNNING'",
                             1,
                             {INT8ARRAYOID}};

} // namespace stmts

namespace detail {

SharedPlaces *shared = nullptr;

namespace {

bool
SameToken(const pg_uuid_t &a, const pg_uuid_t &b)
{
	return memcmp(a.data, b.data, UUID_LEN) == 0;
}

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

} // namespace

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
			bool isnull;
			Datum key = spi::Col(r, 4, &isnull);
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

} // namespace detail

using namespace detail;

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
