/* src/jobs/schedule.hpp — periodic schedules (pqrun.periodic) and their firing.
 *
 * A schedule is a (name, key) row in pqrun.periodic that enqueues one job per
 * due slot, on a cron expression or a fixed run_every interval, both evaluated
 * in the pqrun.cron_timezone zone. Every function here runs inside the
 * caller's transaction and raises PostgreSQL errors (22023 for bad input);
 * those that touch tables must be called while connected to SPI. Datums are
 * in the current memory context.
 */
#pragma once

#include "pg/pg.hpp"

#include "pure/cron.hpp"

#include <type_traits>

namespace pqrun::schedule {

/* The parsed form is kept in plain frames that call PostgreSQL, so it must
 * not need a destructor. */
static_assert(std::is_trivially_copyable_v<cron::Schedule> && std::is_trivially_destructible_v<cron::Schedule>,
              "cron::Schedule must stay plain data");

/* Arguments of pqrun.schedule, in its SQL argument order. */
enum ScheduleArg { kName, kJobType, kCron, kRunEvery, kPayload, kPriority, kKey, kQueue, kActive, kScheduleArgCount };

struct ScheduleArgs {
	Datum value[kScheduleArgCount];
	bool isnull[kScheduleArgCount];
};

/* ParseCron parses a cron expression (cron::Parse) or raises 22023 with
 * its message, which names the bad field and quotes the bad token. */
cron::Schedule ParseCron(const char *expr);

/* CronNext answers the first fire of `schedule` strictly after `after` in
 * zone `tz` (22008 when there is none inside the timestamptz range). */
TimestampTz CronNext(const cron::Schedule &schedule, TimestampTz after, const pg_tz *tz);

/* CheckRunEvery raises 22023 unless `every` is positive (months counting 30
 * days and days 24 hours, as interval comparison does). */
void CheckRunEvery(const Interval *every);

/* EveryNext answers due + k * every for the smallest k >= 1 that lies
 * strictly after `now`, so a schedule keeps its phase and fires a backlog of
 * missed slots once. Day and month parts are calendar arithmetic in `tz`. */
TimestampTz EveryNext(const Interval *every, TimestampTz due, TimestampTz now, pg_tz *tz);

/* Validate raises 22023 (54000 for an oversized payload) for arguments
 * pqrun.schedule must reject. */
void Validate(const ScheduleArgs &args);

/* Upsert validates and creates or replaces the (name, key) schedule. The
 * next run is kept when a replacement leaves cron and run_every unchanged
 * (and does not re-activate the schedule); otherwise it is the first slot
 * after now(). SPI connected. */
void Upsert(const ScheduleArgs &args);

/* Remove deletes the (name, key) schedule; answers whether it existed. SPI
 * connected. */
bool Remove(Datum name, Datum key);

/* FireDue enqueues one job for each active schedule whose next_run has come
 * (at most a batch per call; the rest wait for the next round) and moves
 * next_run to its first slot after now(). Rows are claimed with FOR UPDATE
 * SKIP LOCKED, so concurrent callers never fire the same slot twice. A
 * schedule whose firing fails for reasons of its own (a payload over the
 * size limit, an unknown zone...) is skipped to its next slot with a WARNING
 * instead of failing the round. Answers how many jobs were enqueued. SPI
 * connected, in a transaction. */
int64 FireDue();

} // namespace pqrun::schedule
