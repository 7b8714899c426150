/* src/shmem/stats.cpp — per-queue counters in shared memory (see stats.hpp).
 *
 * A pair whose queue or job type name is 64 bytes or longer has no counters:
 * its stored counts are counted from the tables on each read, as for pairs
 * beyond the table's capacity, and its five-minute rates are NULL. Without
 * shared memory (no preload) Report computes everything from the tables,
 * and the five-minute rates that only counters can know are NULL.
 */
#include "shmem/stats.hpp"

#include "pg/spi_plans.hpp"
#include "shmem/locks.hpp"
#include "shmem/shmem.hpp"

namespace pqrun::stats {

namespace stmts {

spi::Statement kFinishedCounts{
    "finished counts",
    "SELECT queue, job_type, status::text, pg_catalog.count(*) FROM pqrun.job_done GROUP BY 1, 2, 3 ORDER BY 1, 2",
    0,
    {}};

spi::Statement kCountersFromTables{
    "counters from tables",
    "SELECT queue, job_type,"
    "   pg_catalog.count(*) FILTER (WHERE status = 'DONE'),"
    "   pg_catalog.count(*) FILTER (WHERE status = 'FAILED'),"
    "   pg_catalog.count(*) FILTER (WHERE status = 'CANCELLED'),"
    "   NULL::bigint, NULL::bigint,"
    "   pg_catalog.count(*) FILTER (WHERE status = 'DONE' AND finished_at > pg_catalog.now() - '5 minutes'::interval),"
    "   NULL::bigint,"
    "   (pg_catalog.avg(duration_ms) FILTER (WHERE status = 'DONE'"
    "       AND finished_at > pg_catalog.now() - '5 minutes'::interval))::float8,"
    "   NULL::float8"
    " FROM pqrun.job_done GROUP BY queue, job_type",
    0,
    {}};

} // namespace stmts

namespace {

constexpr int kNameLen = 64;
constexpr int kMaxEntries = 4096;
/* The most one database holds (see Room). */
constexpr int kMaxPerDatabase = kMaxEntries / 4;
constexpr int kMaxReadyDatabases = 64;
constexpr int kBuckets = 30;
constexpr int64 kBucketSeconds = 10;
constexpr int kMaxDeltas = 64;

struct Key {
	Oid dboid;
	char queue[kNameLen];
	char job_type[kNameLen];
};

struct Activity {
	int64 enqueued;
	int64 picked;
	int64 done;
	int64 errors;
	int64 duration_ms;
	int64 wait_ms;
};

struct Bucket {
	int64 epoch; /* seconds / kBucketSeconds */
	Activity activity;
};

struct Entry {
	Key key;
	int64 stored[3]; /* finished jobs stored, by Finished */
	Bucket buckets[kBuckets];
};

/* How many entries a database holds (Room): a free slot has none. */
struct Share {
	Oid dboid;
	int32 entries;
};
constexpr int kMaxShares = 256;

struct Shared {
	LWLock *lock;
	int nready;
	Oid ready[kMaxReadyDatabases]; /* databases whose stored counts are exact */
	Share shares[kMaxShares];
	int64 no_idle_epoch; /* a look at a full table found no idle entry in this bucket of time */
};

Shared *shared = nullptr;
HTAB *entries = nullptr;

/* This transaction's changes, applied at COMMIT. */
struct Delta {
	char queue[kNameLen];
	char job_type[kNameLen];
	int64 stored[3];
	Activity activity;
};
Delta deltas[kMaxDeltas];
int ndeltas = 0;
bool invalidate = false; /* stored counts may be wrong after this transaction */
/* RUNNING jobs this transaction's maintenance put back, counted into the
 * database's slot at COMMIT (a rolled-back savepoint's count too). */
shmem::Rescues rescued{};

/* What a delta counts, one field each. */
enum Field {
	kStoredDone,
	kStoredFailed,
	kStoredCancelled,
	kEnqueued,
	kPicked,
	kDoneRecently,
	kErrors,
	kDurationMs,
	kWaitMs
};

int64 *
FieldOf(Delta *d, Field f)
{
	switch (f) {
	case kStoredDone:
	case kStoredFailed:
	case kStoredCancelled:
		return &d->stored[f - kStoredDone];
	case kEnqueued:
		return &d->activity.enqueued;
	case kPicked:
		return &d->activity.picked;
	case kDoneRecently:
		return &d->activity.done;
	case kErrors:
		return &d->activity.errors;
	case kDurationMs:
		return &d->activity.duration_ms;
	case kWaitMs:
		return &d->activity.wait_ms;
	}
	return nullptr;
}

/* Changes noted inside subtransactions, by the nesting level that made
 * them: a rolled-back subtransaction's are dropped, a committed one's pass
 * to its parent, and reach the deltas at the top level. */
struct SubChange {
	int delta;
	Field field;
	int level;
	int64 amount;
};
constexpr int kMaxSubChanges = 1024;
SubChange sub_changes[kMaxSubChanges];
int nsub_changes = 0;

/* Add counts `amount` into field `f` of `d`, or holds it back until the
 * subtransaction noting it commits. */
void
Add(Delta *d, Field f, int64 amount)
{
	int level = GetCurrentTransactionNestLevel();
	int delta = static_cast<int>(d - deltas);
	/* One entry per (delta, field, level): a batch adds to it. */
	for (int i = nsub_changes - 1; level > 1 && i >= 0; i--) {
		SubChange &c = sub_changes[i];
		if (c.delta == delta && c.field == f && c.level == level) {
			c.amount += amount;
			return;
		}
	}
	if (level > 1 && nsub_changes < kMaxSubChanges) {
		sub_changes[nsub_changes++] = SubChange{delta, f, level, amount};
		return;
	}
	/* Too many to hold back: a rollback could no longer take them out. */
	if (level > 1)
		invalidate = true;
	*FieldOf(d, f) += amount;
}

/* Fits answers whether a pair can have counters: both names shorter than
 * the key's fields, so that no two pairs share a key. */
bool
Fits(const char *queue, const char *job_type)
{
	return strlen(queue) < kNameLen && strlen(job_type) < kNameLen;
}

/* CopyName copies a name that fits into a zero-padded key field. */
void
CopyName(char *dest, const char *name)
{
	memset(dest, 0, kNameLen);
	strlcpy(dest, name, kNameLen);
}

Delta *
DeltaFor(const char *queue, const char *job_type)
{
	/* A pair without counters is counted from the tables at the next read. */
	if (!Fits(queue, job_type)) {
		invalidate = true;
		return nullptr;
	}
	for (int i = 0; i < ndeltas; i++)
		if (strcmp(deltas[i].queue, queue) == 0 && strcmp(deltas[i].job_type, job_type) == 0)
			return &deltas[i];
	if (ndeltas == kMaxDeltas) {
		invalidate = true;
		return nullptr;
	}
	Delta *d = &deltas[ndeltas++];
	memset(d, 0, sizeof(Delta));
	CopyName(d->queue, queue);
	CopyName(d->job_type, job_type);
	return d;
}

bool
IsReady(Oid dboid)
{
	for (int i = 0; i < shared->nready; i++)
		if (shared->ready[i] == dboid)
			return true;
	return false;
}

void
SetReady(Oid dboid, bool ready)
{
	for (int i = 0; i < shared->nready; i++) {
		if (shared->ready[i] == dboid) {
			if (!ready)
				shared->ready[i] = shared->ready[--shared->nready];
			return;
		}
	}
	if (ready && shared->nready < kMaxReadyDatabases)
		shared->ready[shared->nready++] = dboid;
}

/* MakeKey makes the key of a pair that Fits. */
Key
MakeKey(Oid dboid, const char *queue, const char *job_type)
{
	Key key;
	memset(&key, 0, sizeof(key));
	key.dboid = dboid;
	CopyName(key.queue, queue);
	CopyName(key.job_type, job_type);
	return key;
}

int64
NowEpoch()
{
	return (GetCurrentTimestamp() / USECS_PER_SEC) / kBucketSeconds;
}

/* Idle answers whether `entry` counts nothing: no finished job stored and
 * no activity in the last five minutes. Forgetting it loses nothing. */
bool
Idle(const Entry &entry, int64 epoch)
{
	for (int64 n : entry.stored)
		if (n != 0)
			return false;
	for (const Bucket &b : entry.buckets)
		if (b.epoch > epoch - kBuckets)
			return false;
	return true;
}

/* ShareOf answers the count of `dboid`'s entries, taking a free slot for
 * it when `take`; nullptr when it has none. Lock held exclusively. */
Share *
ShareOf(Oid dboid, bool take)
{
	Share *free_slot = nullptr;
	for (Share &share : shared->shares) {
		if (share.entries > 0 && share.dboid == dboid)
			return &share;
		if (free_slot == nullptr && share.entries == 0)
			free_slot = &share;
	}
	if (!take || free_slot == nullptr)
		return nullptr;
	free_slot->dboid = dboid;
	return free_slot;
}

/* Forget removes `entry` and counts it out of its database's share. */
void
Forget(Entry *entry)
{
	if (Share *share = ShareOf(entry->key.dboid, false))
		share->entries--;
	hash_search(entries, &entry->key, HASH_REMOVE, nullptr);
}

/* Room answers whether database `dboid` may have one more entry: it holds
 * fewer than its share, so that the pairs one database's producers make
 * cannot leave the others none (nor more databases than there are shares),
 * and the table has a free entry, or one that is idle, forgotten for it. A
 * full table is looked through for an idle entry at most once per bucket
 * of time (an entry becomes idle only as buckets age), so a pair without
 * an entry costs its commits no scan. Caller holds the lock exclusively. */
bool
Room(Oid dboid)
{
	Share *share = ShareOf(dboid, true);
	if (share == nullptr || share->entries >= kMaxPerDatabase)
		return false;
	if (hash_get_num_entries(entries) < kMaxEntries)
		return true;
	int64 epoch = NowEpoch();
	if (shared->no_idle_epoch == epoch)
		return false;
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	for (Entry *e; (e = static_cast<Entry *>(hash_seq_search(&scan))) != nullptr;) {
		if (Idle(*e, epoch)) {
			hash_seq_term(&scan);
			Forget(e);
			return true;
		}
	}
	shared->no_idle_epoch = epoch;
	return false;
}

/* EntryFor answers the entry of `key`, creating it; NULL when there is no
 * Room for it. Caller holds the lock exclusively. */
Entry *
EntryFor(const Key &key)
{
	bool found;
	auto *entry = static_cast<Entry *>(hash_search(entries, &key, HASH_FIND, &found));
	if (entry != nullptr || !Room(key.dboid))
		return entry;
	entry = static_cast<Entry *>(hash_search(entries, &key, HASH_ENTER_NULL, &found));
	if (entry && !found) {
		memset(entry->stored, 0, sizeof(entry->stored));
		memset(entry->buckets, 0, sizeof(entry->buckets));
		ShareOf(key.dboid, true)->entries++;
	}
	return entry;
}

void
AddActivity(Entry *entry, const Activity &a, int64 epoch)
{
	Bucket &b = entry->buckets[epoch % kBuckets];
	if (b.epoch != epoch) {
		memset(&b, 0, sizeof(b));
		b.epoch = epoch;
	}
	b.activity.enqueued += a.enqueued;
	b.activity.picked += a.picked;
	b.activity.done += a.done;
	b.activity.errors += a.errors;
	b.activity.duration_ms += a.duration_ms;
	b.activity.wait_ms += a.wait_ms;
}

void
ResetLocal()
{
	rescued = shmem::Rescues{};
	ndeltas = 0;
	nsub_changes = 0;
	invalidate = false;
}

/* Finished jobs of a (queue, job_type) that has no entry: the table is
 * full, or the pair does not fit. */
struct Unkept {
	const char *queue;
	const char *job_type;
	int64 stored[3];
};

/* Rebuild recounts this database's stored finished jobs, and answers in
 * `unkept` (`*nunkept` of them) those of pairs the full table has no entry
 * for. SPI connected. */
void
Rebuild(Unkept **unkept, int *nunkept)
{
	uint64 n = spi::Exec(stmts::kFinishedCounts, nullptr, nullptr, SPI_OK_SELECT);
	struct Count {
		const char *queue;
		const char *job_type;
		Finished status;
		int64 n;
	};
	Count *counts = static_cast<Count *>(palloc(sizeof(Count) * (n + 1)));
	int ncounts = 0;
	for (uint64 i = 0; i < n; i++) {
		bool isnull;
		Finished status;
		char *label = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
		if (!FinishedOf(ParseStatus(label), &status))
			continue;
		Count &c = counts[ncounts++];
		c.queue = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		c.job_type = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		c.status = status;
		c.n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
	}
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	Entry *entry;
	while ((entry = static_cast<Entry *>(hash_seq_search(&scan))) != nullptr)
		if (entry->key.dboid == MyDatabaseId)
			memset(entry->stored, 0, sizeof(entry->stored));
	*unkept = static_cast<Unkept *>(palloc(sizeof(Unkept) * (ncounts + 1)));
	*nunkept = 0;
	for (int i = 0; i < ncounts; i++) {
		const Count &c = counts[i];
		Entry *e = Fits(c.queue, c.job_type) ? EntryFor(MakeKey(MyDatabaseId, c.queue, c.job_type)) : nullptr;
		if (e != nullptr) {
			e->stored[static_cast<int>(c.status)] += c.n;
			continue;
		}
		/* The counts come ordered by pair: a pair's statuses are adjacent. */
		Unkept *u = *nunkept > 0 ? &(*unkept)[*nunkept - 1] : nullptr;
		if (u == nullptr || strcmp(u->queue, c.queue) != 0 || strcmp(u->job_type, c.job_type) != 0) {
			u = &(*unkept)[(*nunkept)++];
			memset(u, 0, sizeof(Unkept));
			u->queue = c.queue;
			u->job_type = c.job_type;
		}
		u->stored[static_cast<int>(c.status)] += c.n;
	}
	SetReady(MyDatabaseId, *nunkept == 0);
	LWLockRelease(shared->lock);
}

} // namespace

bool
FinishedOf(JobStatus status, Finished *out)
{
	switch (status) {
	case JobStatus::kDone:
		*out = Finished::kDone;
		return true;
	case JobStatus::kFailed:
		*out = Finished::kFailed;
		return true;
	case JobStatus::kCancelled:
		*out = Finished::kCancelled;
		return true;
	case JobStatus::kBlocked:
	case JobStatus::kReady:
	case JobStatus::kRunning:
		break;
	}
	return false;
}

void
Enqueued(const char *queue, const char *job_type)
{
	if (Delta *d = DeltaFor(queue, job_type))
		Add(d, kEnqueued, 1);
}

void
PickedUp(const char *queue, const char *job_type, int64 wait_ms)
{
	if (Delta *d = DeltaFor(queue, job_type)) {
		Add(d, kPicked, 1);
		Add(d, kWaitMs, Max(wait_ms, 0));
	}
}

void
Errored(const char *queue, const char *job_type)
{
	if (Delta *d = DeltaFor(queue, job_type))
		Add(d, kErrors, 1);
}

void
JobFinished(const char *queue, const char *job_type, Finished status, int64 duration_ms)
{
	if (Delta *d = DeltaFor(queue, job_type)) {
		Add(d, static_cast<Field>(kStoredDone + static_cast<int>(status)), 1);
		if (status == Finished::kDone) {
			Add(d, kDoneRecently, 1);
			Add(d, kDurationMs, Max(duration_ms, 0));
		} else if (status == Finished::kFailed) {
			Add(d, kErrors, 1);
		}
	}
}

void
FinishedRemoved(const char *queue, const char *job_type, Finished status, int64 count)
{
	if (Delta *d = DeltaFor(queue, job_type))
		Add(d, static_cast<Field>(kStoredDone + static_cast<int>(status)), -count);
}

void
OnCommit()
{
	shmem::AddRescues(MyDatabaseId, rescued);
	if (shared == nullptr || (ndeltas == 0 && !invalidate)) {
		ResetLocal();
		return;
	}
	int64 epoch = NowEpoch();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	bool ready = IsReady(MyDatabaseId);
	for (int i = 0; i < ndeltas; i++) {
		Entry *entry = EntryFor(MakeKey(MyDatabaseId, deltas[i].queue, deltas[i].job_type));
		if (entry == nullptr) {
			invalidate = true;
			continue;
		}
		if (ready)
			for (int s = 0; s < 3; s++)
				entry->stored[s] += deltas[i].stored[s];
		AddActivity(entry, deltas[i].activity, epoch);
	}
	if (invalidate)
		SetReady(MyDatabaseId, false);
	LWLockRelease(shared->lock);
	ResetLocal();
}

void
Rescued(int64 stale, int64 orphaned)
{
	rescued.stale += stale;
	rescued.orphaned += orphaned;
}

shmem::TableUsage
Usage()
{
	shmem::TableUsage usage{"queue_counters", 0, kMaxEntries};
	if (shared == nullptr)
		return usage;
	LWLockAcquire(shared->lock, LW_SHARED);
	usage.used = hash_get_num_entries(entries);
	LWLockRelease(shared->lock);
	return usage;
}

void
OnAbort()
{
	ResetLocal();
}

void
OnPrepare()
{
	if (ndeltas > 0 || invalidate)
		InvalidateDatabase();
	ResetLocal();
}

void
InvalidateDatabase()
{
	if (shared == nullptr)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	SetReady(MyDatabaseId, false);
	LWLockRelease(shared->lock);
}

void
OnSubCommit()
{
	int level = GetCurrentTransactionNestLevel();
	int kept = 0;
	for (int i = 0; i < nsub_changes; i++) {
		SubChange c = sub_changes[i];
		if (c.level >= level && level - 1 <= 1) {
			*FieldOf(&deltas[c.delta], c.field) += c.amount;
			continue;
		}
		if (c.level >= level)
			c.level = level - 1;
		sub_changes[kept++] = c;
	}
	nsub_changes = kept;
}

void
OnSubAbort()
{
	int level = GetCurrentTransactionNestLevel();
	int kept = 0;
	for (int i = 0; i < nsub_changes; i++)
		if (sub_changes[i].level < level)
			sub_changes[kept++] = sub_changes[i];
	nsub_changes = kept;
}

void
ResetDatabase()
{
	if (shared == nullptr)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	Entry *entry;
	while ((entry = static_cast<Entry *>(hash_seq_search(&scan))) != nullptr)
		if (entry->key.dboid == MyDatabaseId)
			Forget(entry);
	SetReady(MyDatabaseId, true);
	LWLockRelease(shared->lock);
}

void
KeepDatabases(const Oid *oids, int n)
{
	if (shared == nullptr)
		return;
	auto kept = [=](Oid dboid) { return shmem::Listed(oids, n, dboid); };
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	Entry *entry;
	while ((entry = static_cast<Entry *>(hash_seq_search(&scan))) != nullptr)
		if (!kept(entry->key.dboid))
			Forget(entry);
	/* A database created since `oids` were read may lose its counters here:
	 * not ready, its next read rebuilds the stored counts from the tables. */
	for (int i = shared->nready - 1; i >= 0; i--)
		if (!kept(shared->ready[i]))
			SetReady(shared->ready[i], false);
	LWLockRelease(shared->lock);
}

void
Report(Tuplestorestate *out, TupleDesc desc)
{
	constexpr int kColumns = 11;
	Datum values[kColumns];
	bool nulls[kColumns];
	if (shared == nullptr) {
		/* No counters: everything the tables can tell. */
		uint64 n = spi::Exec(stmts::kCountersFromTables, nullptr, nullptr, SPI_OK_SELECT);
		for (uint64 i = 0; i < n; i++) {
			heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
			tuplestore_putvalues(out, desc, values, nulls);
		}
		return;
	}
	LWLockAcquire(shared->lock, LW_SHARED);
	bool ready = IsReady(MyDatabaseId);
	LWLockRelease(shared->lock);
	Unkept *unkept = nullptr;
	int nunkept = 0;
	if (!ready)
		Rebuild(&unkept, &nunkept);

	/* Copy this database's entries out, then build rows without the lock. */
	LWLockAcquire(shared->lock, LW_SHARED);
	long total = hash_get_num_entries(entries);
	Entry *copies = static_cast<Entry *>(palloc(sizeof(Entry) * (total + 1)));
	int ncopies = 0;
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	Entry *entry;
	while ((entry = static_cast<Entry *>(hash_seq_search(&scan))) != nullptr)
		if (entry->key.dboid == MyDatabaseId && ncopies < total)
			copies[ncopies++] = *entry;
	LWLockRelease(shared->lock);

	int64 now_epoch = NowEpoch();
	for (int i = 0; i < ncopies; i++) {
		const Entry &e = copies[i];
		Activity recent{};
		for (const Bucket &b : e.buckets) {
			if (b.epoch <= now_epoch - kBuckets || b.epoch > now_epoch)
				continue;
			recent.enqueued += b.activity.enqueued;
			recent.picked += b.activity.picked;
			recent.done += b.activity.done;
			recent.errors += b.activity.errors;
			recent.duration_ms += b.activity.duration_ms;
			recent.wait_ms += b.activity.wait_ms;
		}
		if (e.stored[0] == 0 && e.stored[1] == 0 && e.stored[2] == 0 && recent.enqueued == 0 && recent.picked == 0 &&
		    recent.done == 0 && recent.errors == 0)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(e.key.queue);
		values[1] = CStringGetTextDatum(e.key.job_type);
		for (int s = 0; s < 3; s++)
			values[2 + s] = Int64GetDatum(e.stored[s]);
		values[5] = Int64GetDatum(recent.enqueued);
		values[6] = Int64GetDatum(recent.picked);
		values[7] = Int64GetDatum(recent.done);
		values[8] = Int64GetDatum(recent.errors);
		values[9] = Float8GetDatum(recent.done ? static_cast<double>(recent.duration_ms) / recent.done : 0);
		nulls[9] = recent.done == 0;
		values[10] = Float8GetDatum(recent.picked ? static_cast<double>(recent.wait_ms) / recent.picked : 0);
		nulls[10] = recent.picked == 0;
		tuplestore_putvalues(out, desc, values, nulls);
	}
	/* Pairs beyond the table's capacity: their stored counts, as counted
	 * just now; their recent activity is unknown. */
	for (int i = 0; i < nunkept; i++) {
		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(unkept[i].queue);
		values[1] = CStringGetTextDatum(unkept[i].job_type);
		for (int s = 0; s < 3; s++)
			values[2 + s] = Int64GetDatum(unkept[i].stored[s]);
		for (int c = 5; c < kColumns; c++)
			nulls[c] = true;
		tuplestore_putvalues(out, desc, values, nulls);
	}
}

Size
ShmemSize()
{
	return add_size(MAXALIGN(sizeof(Shared)), hash_estimate_size(kMaxEntries, sizeof(Entry)));
}

void
ShmemInit()
{
	bool found;
	shared = static_cast<Shared *>(ShmemInitStruct("pqrun stats", sizeof(Shared), &found));
	if (!found) {
		memset(shared, 0, sizeof(Shared));
		shared->lock = shmem::LockOf(shmem::Lock::kCounters);
	}
	HASHCTL info;
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(Key);
	info.entrysize = sizeof(Entry);
	entries =
	    ShmemInitHash("pqrun stats entries", kMaxEntries, kMaxEntries, &info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

} // namespace pqrun::stats
