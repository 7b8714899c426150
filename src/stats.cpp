/* src/stats.cpp — per-queue counters in shared memory (see stats.hpp).
 *
 * Names longer than 63 bytes are cut in the key, so two queues that differ
 * only after that share a row. Without shared memory (no preload) Report
 * computes everything from the tables, and the five-minute rates that only
 * counters can know are NULL.
 */
#include "stats.hpp"

extern "C" {
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
}

#include "spi_plans.hpp"

namespace pqrun::stats {

namespace {

constexpr int kNameLen = 64;
constexpr int kMaxEntries = 4096;
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

struct Shared {
	LWLock *lock;
	int nready;
	Oid ready[kMaxReadyDatabases]; /* databases whose stored counts are exact */
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

/* Changes noted so far, and that number when each open subtransaction
 * began, to tell whether a rolled-back subtransaction noted anything. */
constexpr int kMaxNesting = 64;
uint64 changes = 0;
uint64 changes_at_start[kMaxNesting];

void
CopyName(char *dest, const char *name)
{
	memset(dest, 0, kNameLen);
	strlcpy(dest, name, kNameLen);
	/* Never cut a multibyte character in half. */
	int len = pg_mbcliplen(dest, strlen(dest), kNameLen - 1);
	memset(dest + len, 0, kNameLen - len);
}

Delta *
DeltaFor(const char *queue, const char *job_type)
{
	changes++;
	/* Names short enough to need no clipping equal their stored copies: the
	 * per-job path is then only string compares. */
	if (strlen(queue) < kNameLen && strlen(job_type) < kNameLen)
		for (int i = 0; i < ndeltas; i++)
			if (strcmp(deltas[i].queue, queue) == 0 && strcmp(deltas[i].job_type, job_type) == 0)
				return &deltas[i];
	char q[kNameLen], t[kNameLen];
	CopyName(q, queue);
	CopyName(t, job_type);
	for (int i = 0; i < ndeltas; i++)
		if (memcmp(deltas[i].queue, q, kNameLen) == 0 && memcmp(deltas[i].job_type, t, kNameLen) == 0)
			return &deltas[i];
	if (ndeltas == kMaxDeltas) {
		invalidate = true;
		return nullptr;
	}
	Delta *d = &deltas[ndeltas++];
	memset(d, 0, sizeof(Delta));
	memcpy(d->queue, q, kNameLen);
	memcpy(d->job_type, t, kNameLen);
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

Key
MakeKey(Oid dboid, const char *queue, const char *job_type)
{
	Key key;
	memset(&key, 0, sizeof(key));
	key.dboid = dboid;
	memcpy(key.queue, queue, kNameLen);
	memcpy(key.job_type, job_type, kNameLen);
	return key;
}

/* EntryFor answers the entry of `key`, creating it; NULL when the table is
 * full. Caller holds the lock exclusively. */
Entry *
EntryFor(const Key &key)
{
	bool found;
	auto *entry = static_cast<Entry *>(hash_search(entries, &key, HASH_ENTER_NULL, &found));
	if (entry && !found) {
		memset(entry->stored, 0, sizeof(entry->stored));
		memset(entry->buckets, 0, sizeof(entry->buckets));
	}
	return entry;
}

int64
NowEpoch()
{
	return (GetCurrentTimestamp() / USECS_PER_SEC) / kBucketSeconds;
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
	ndeltas = 0;
	invalidate = false;
}

/* Finished jobs of a (queue, job_type) that has no entry: the table is full. */
struct Unkept {
	char queue[kNameLen];
	char job_type[kNameLen];
	int64 stored[3];
};

/* Rebuild recounts this database's stored finished jobs, and answers in
 * `unkept` (`*nunkept` of them) those of pairs the full table has no entry
 * for. SPI connected. */
void
Rebuild(Unkept **unkept, int *nunkept)
{
	uint64 n = spi::Exec(spi::Stmt::kFinishedCounts, nullptr, nullptr, SPI_OK_SELECT);
	struct Count {
		char queue[kNameLen];
		char job_type[kNameLen];
		Finished status;
		int64 n;
	};
	Count *counts = static_cast<Count *>(palloc(sizeof(Count) * (n + 1)));
	int ncounts = 0;
	for (uint64 i = 0; i < n; i++) {
		bool isnull;
		Finished status;
		char *label = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
		if (!ParseFinished(label, &status))
			continue;
		Count &c = counts[ncounts++];
		CopyName(c.queue, TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)));
		CopyName(c.job_type,
		         TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)));
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
		Entry *e = EntryFor(MakeKey(MyDatabaseId, c.queue, c.job_type));
		if (e != nullptr) {
			e->stored[static_cast<int>(c.status)] += c.n;
			continue;
		}
		/* The counts come ordered by pair: a pair's statuses are adjacent. */
		Unkept *u = *nunkept > 0 ? &(*unkept)[*nunkept - 1] : nullptr;
		if (u == nullptr || memcmp(u->queue, c.queue, kNameLen) != 0 || memcmp(u->job_type, c.job_type, kNameLen) != 0) {
			u = &(*unkept)[(*nunkept)++];
			memset(u, 0, sizeof(Unkept));
			memcpy(u->queue, c.queue, kNameLen);
			memcpy(u->job_type, c.job_type, kNameLen);
		}
		u->stored[static_cast<int>(c.status)] += c.n;
	}
	SetReady(MyDatabaseId, *nunkept == 0);
	LWLockRelease(shared->lock);
}

} // namespace

bool
ParseFinished(const char *status, Finished *out)
{
	if (strcmp(status, "DONE") == 0)
		*out = Finished::kDone;
	else if (strcmp(status, "FAILED") == 0)
		*out = Finished::kFailed;
	else if (strcmp(status, "CANCELLED") == 0)
		*out = Finished::kCancelled;
	else
		return false;
	return true;
}

void
Enqueued(const char *queue, const char *job_type)
{
	if (Delta *d = DeltaFor(queue, job_type))
		d->activity.enqueued++;
}

void
PickedUp(const char *queue, const char *job_type, int64 wait_ms)
{
	if (Delta *d = DeltaFor(queue, job_type)) {
		d->activity.picked++;
		d->activity.wait_ms += Max(wait_ms, 0);
	}
}

void
Errored(const char *queue, const char *job_type)
{
	if (Delta *d = DeltaFor(queue, job_type))
		d->activity.errors++;
}

void
JobFinished(const char *queue, const char *job_type, Finished status, int64 duration_ms)
{
	if (Delta *d = DeltaFor(queue, job_type)) {
		d->stored[static_cast<int>(status)]++;
		if (status == Finished::kDone) {
			d->activity.done++;
			d->activity.duration_ms += Max(duration_ms, 0);
		} else if (status == Finished::kFailed) {
			d->activity.errors++;
		}
	}
}

void
FinishedRemoved(const char *queue, const char *job_type, Finished status, int64 count)
{
	if (Delta *d = DeltaFor(queue, job_type))
		d->stored[static_cast<int>(status)] -= count;
}

void
OnCommit()
{
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
OnAbort()
{
	ResetLocal();
}

void
OnSubStart()
{
	int level = GetCurrentTransactionNestLevel();
	if (level < kMaxNesting)
		changes_at_start[level] = changes;
}

void
OnSubAbort()
{
	/* What a subtransaction noted cannot be told apart from the rest: if it
	 * noted anything, have the stored counts rebuilt on the next read. */
	int level = GetCurrentTransactionNestLevel();
	if (level >= kMaxNesting || changes_at_start[level] != changes)
		invalidate = true;
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
			hash_search(entries, &entry->key, HASH_REMOVE, nullptr);
	SetReady(MyDatabaseId, true);
	LWLockRelease(shared->lock);
}

void
KeepDatabases(const Oid *oids, int n)
{
	if (shared == nullptr)
		return;
	auto kept = [=](Oid dboid) {
		for (int i = 0; i < n; i++)
			if (oids[i] == dboid)
				return true;
		return false;
	};
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	HASH_SEQ_STATUS scan;
	hash_seq_init(&scan, entries);
	Entry *entry;
	while ((entry = static_cast<Entry *>(hash_seq_search(&scan))) != nullptr)
		if (!kept(entry->key.dboid))
			hash_search(entries, &entry->key, HASH_REMOVE, nullptr);
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
		uint64 n = spi::Exec(spi::Stmt::kCountersFromTables, nullptr, nullptr, SPI_OK_SELECT);
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
		shared->lock = &(GetNamedLWLockTranche("pqrun"))[2].lock;
	}
	HASHCTL info;
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(Key);
	info.entrysize = sizeof(Entry);
	entries = ShmemInitHash("pqrun stats entries", kMaxEntries, kMaxEntries, &info,
	                        HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
}

} // namespace pqrun::stats
