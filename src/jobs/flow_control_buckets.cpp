/* src/jobs/flow_control_buckets.cpp — the token buckets of the rate
 * limits, of queues and job types (in their counters) and of concurrency
 * keys (KeyBuckets) (flow_control_state.hpp). */
#include "jobs/flow_control_state.hpp"

namespace pqrun::flow_control {

namespace detail {

namespace {

/* ProbeStart answers the first slot of the probe for the bucket of key
 * `key_hash` under rate limit per key `control_id`. */
int
ProbeStart(int64 control_id, uint64 key_hash)
{
	return static_cast<int>((key_hash ^ (static_cast<uint64>(control_id) * UINT64CONST(0x9E3779B97F4A7C15))) %
	                        kMaxKeyBuckets);
}

} // namespace

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

} // namespace detail

} // namespace pqrun::flow_control
