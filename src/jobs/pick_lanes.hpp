/* src/jobs/pick_lanes.hpp — claiming jobs that have a concurrency key.
 *
 * A keyed job is not in the pick index but in its lane: job_live_lane,
 * ordered by (queue, concurrency_key, -priority, id). A pickup walks the
 * lanes of each keyed queue it may claim from (flow_control::LaneQueues) key
 * by key, one job per key in turn, from the key after the one this backend
 * last claimed from in that queue, around to where it began, until it has
 * what it wants or a whole round claimed nothing. Finding the next key is
 * one index descent; a key at its limit (flow_control::KeyBlocked) is
 * passed over before any of its jobs is read, so one key's backlog costs
 * the other keys nothing and cannot starve them. A paused or full queue is
 * passed over whole (flow_control::QueueBlocked), and so is, for a while,
 * one whose keys a look of this backend found all at their limits. Below the executor
 * (pick_direct::LaneScan) where the one decision allows, a lane's scan
 * starts at its hint, shared by all backends, past the head of claimed and
 * ended jobs whose index entries vacuum has not removed yet; else one SQL
 * statement per step.
 */
#pragma once

#include "jobs/pick_filter.hpp"
#include "pg/pg.hpp"
#include "xact/wake.hpp"

namespace pqrun::pick_lanes {

/* What a pickup asks of the lanes: up to `want` jobs of `filter`'s job
 * types (its queues are the keyed ones flow_control::LaneQueues gives), none of the (queue, job_type) pairs `blocked_pairs`
 * (flow_control::BlockedPairs, Datum(0): none), claimed at `at` by `worker`
 * (text); `gated` when flow controls apply (flow_control::PrepareLook). */
struct Request {
	Datum worker;
	int32 want;
	PickFilter filter;
	Datum blocked_pairs;
	TimestampTz at;
	bool gated;
};

/* Where the locked jobs go, as the locking pick's rows (pqrun.jobs
 * columns, then ctid): `dest` for the SQL statements, emit(arg, ...) below
 * the executor (pick_direct.hpp); either keeps the ids of the jobs it
 * keeps in *claimed_ids and counts them in *claimed (a row whose limit
 * filled meanwhile is not kept). */
struct Receiver {
	DestReceiver *dest;
	bool (*emit)(void *arg, const Datum *values, const bool *nulls);
	void *arg;
	TupleDesc out_desc;
	const int64 *const *claimed_ids;
	const int *claimed;
};

/* Pick locks the jobs of `request` (after flow_control::PrepareLook) and hands
 * them to `to`, answering how many were kept. */
uint64 Pick(const Request &request, const Receiver &to);

/* Ready answers whether a lane of the last PrepareLook's keyed queues holds a
 * READY job of `filter`'s job types whose key has room (await_jobs). */
bool Ready(const PickFilter &filter);

/* ShmemSize / ShmemInit size and attach the lanes' hints (hooks.cpp). */
/* The hints of the lanes of filtered picks (pick_direct.cpp), kept beside
 * the keyed lanes' and read and written as theirs: a lane is (queue,
 * job_type), or (job_type) when `queue` is Datum(0), named once per pick
 * (NameFilterLane: a hash of its names, with other seeds than a keyed
 * lane's, so that no keyed lane has its name). FilterLaneStart
 * answers where its scan may start now (INT64_MIN keys: its head;
 * INT64_MAX: it was empty, and nothing became READY since);
 * FilterLaneHint records that no job of it before `start` was READY as of
 * hint generation `gen` (pick_hint::Gen, read before the pick's snapshot). */
struct FilterLaneName {
	uint64 hash;
	uint64 check;
};
FilterLaneName NameFilterLane(Datum queue, Datum job_type);
pick_hint::PickKey FilterLaneStart(const FilterLaneName &lane);
void FilterLaneHint(const FilterLaneName &lane, pick_hint::PickKey start, uint64 gen);

Size ShmemSize();
void ShmemInit();

} // namespace pqrun::pick_lanes
