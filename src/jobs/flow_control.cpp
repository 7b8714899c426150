/* src/jobs/flow_control.cpp — pauses, concurrency limits and rate limits
 * at claim time (flow_control.hpp): what applies to a pickup's look, what
 * is full, and the places and tokens a claim reserves. The other parts of
 * flow control, and what they share: flow_control_state.hpp. */
#include "jobs/flow_control_state.hpp"

namespace pqrun::flow_control {

namespace detail {

TimestampTz next_token_at = 0; /* when the last PrepareLook's emptiest bucket has a token again, 0: none */

namespace {

/* A waiter held back by a full limit looks again at least this often. */
constexpr int kLimitedPollMs = 250;
bool limited_look = false;
bool skipped = false;
bool held_back = false;       /* a row of the look was passed over by Blocked or Reserve, not by the pick's filter */
bool counted_applies = false; /* the last PrepareLook's look met a limit or rate limit */

/* The keyed queues the last PrepareLook's look may claim from (LaneQueues). */
const char **lane_queues = nullptr;
int nlane_queues = 0;

/* What one look allocates (filters taken apart, the blocked lists, a
 * recount's ids): reset by the next PrepareLook, so that a long poll's many
 * looks do not pile it up. */
MemoryContext look_context = nullptr;

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

} // namespace

} // namespace detail

using namespace detail;

bool
PrepareLook(const PickFilter &filter, int32 want)
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
	Filter types(ncontrols > 0 ? filter.job_types : nullptr), names(ncontrols > 0 ? filter.queues : nullptr);
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

} // namespace pqrun::flow_control
