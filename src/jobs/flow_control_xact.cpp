/* src/jobs/flow_control_xact.cpp — what a transaction took (places,
 * tokens) or ended (runs of limited jobs): given back at its rollback, or
 * at its commit (flow_control_state.hpp). */
#include "jobs/flow_control_state.hpp"

#include "xact/wake.hpp"

namespace pqrun::flow_control {

namespace detail {

Taken *taken = nullptr;
int ntaken = 0;
int taken_room = 0;

namespace {

Ended ended[kMaxEnded];
int nended = 0;
bool ended_overflow = false;

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

} // namespace detail

using namespace detail;

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

} // namespace pqrun::flow_control
