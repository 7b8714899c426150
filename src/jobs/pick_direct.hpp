/* src/jobs/pick_direct.hpp — a pickup's locking scan below the executor.
 *
 * A pickup whose claims are deferred (deferred_claims.hpp) only locks its
 * jobs: through SQL that is a statement (plan lookup, executor start of a
 * Limit, LockRows and IndexScan, projection) costing more than the scan
 * itself, run for every pickup. The common case walks job_live_pick with
 * the index access method and locks each row as LockRows does for FOR
 * UPDATE SKIP LOCKED in READ COMMITTED: a row locked by another transaction
 * is passed over, a row updated since the scan's snapshot is locked in its
 * newest version, which is handed out only if it still qualifies.
 *
 * Where direct_rows::GoDirect declines (what only the executor enforces,
 * REPEATABLE READ and above, where such an update is a serialization failure
 * and SERIALIZABLE takes predicate locks: see there) or job_live_pick is not
 * the index pqrun created, nothing is locked here and the SQL statement
 * picks.
 */
#pragma once

#include "jobs/pick_filter.hpp"
#include "pg/pg.hpp"
#include "xact/wake.hpp"

namespace pqrun::pick_direct {

/* What a pickup asks for: jobs of `filter`, from pickup key `start` on, at
 * most `limit`, claimed at `at` by `worker` (text). */
struct Request {
	Datum worker;
	int32 limit;
	PickFilter filter;
	pick_hint::PickKey start;
	TimestampTz at;
	bool gated; /* flow controls apply: jobs they hold back are passed over */
};

/* Emit receives each locked job as the locking pick statement's row
 * (pick.cpp, LOCK_PICK): the pqrun.jobs columns of its claim, then the
 * row's ctid; it answers false when the job is not claimed after all (its
 * limit filled), which does not count against the request's limit. */
using Emit = bool (*)(void *arg, const Datum *values, const bool *nulls);

/* Pick locks the jobs of `request` in pickup-key order and emits them as
 * rows of `out_desc` (pqrun.jobs) plus ctid, setting `count`. Answers
 * false, having locked and emitted nothing, when the SQL path must pick. */
bool Pick(const Request &request, TupleDesc out_desc, Emit emit, void *arg, uint64 *count);

/* AnyReady sets `ready` to whether a job of `request`'s filters (it must
 * have one) without a key is READY, not delayed and not held back by the
 * controls when `request.gated`, from `request.start` on, as the lanes of a
 * filtered pick find it; it answers false, having looked at nothing, when
 * the SQL statement must look. Of `request`, the filters, start and gated
 * are used. */
bool AnyReady(const Request &request, bool *ready);

/* LaneScan walks job_live_lane below the executor for a pickup's jobs with
 * concurrency keys (pick_lanes.cpp decides which lanes, in which order),
 * under one snapshot taken when it opens, as Pick does. */
class LaneScan {
  public:
	struct State;

	/* Open answers false, with nothing open, when the SQL path must pick
	 * (as Pick, or job_live_lane is not the index pqrun created). Of
	 * `request`, its worker, job types, time and gated are used. Jobs whose
	 * ids are among the *ntaken in *taken (this pickup's so far) are passed
	 * over. */
	bool Open(const Request &request, TupleDesc out_desc, Emit emit, void *arg, const int64 *const *taken,
	          const int *ntaken);

	/* NextKey answers the first key after `after` among the entries of
	 * `queue`'s lanes, or nullptr; its jobs may all have ended since (one
	 * descent, no row read). */
	char *NextKey(Datum queue, const char *after);

	/* LockOne locks the first job of lane (queue, key) at or after pickup
	 * key `start` that it may, and emits it, answering emit's answer (false
	 * when none). *passed is the pickup key of the row emitted (the end of
	 * the lane when none), and *clean whether every row before it was one no
	 * pickup may claim (not READY, or locked by another pickup, whose
	 * rollback makes it READY again through wake.hpp): a lane hint may then
	 * move up to *passed. */
	bool LockOne(Datum queue, Datum key, pick_hint::PickKey start, pick_hint::PickKey *passed, bool *clean);

	/* Close ends what Open began (an error's abort does as well). */
	void Close();

  private:
	State *state_ = nullptr;
};

} // namespace pqrun::pick_direct
