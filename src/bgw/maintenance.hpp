/* src/bgw/maintenance.hpp — one maintenance round (maintenance.cpp). */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::maintenance {

/* Counts of one round, as reported by pqrun.run_maintenance(). */
struct Counts {
	int32 reaped;
	int64 orphaned;
	int64 scheduled;
	int64 unblocked;
	int64 promoted;
	int64 purged;
};

/* Run does one round in the current transaction; SPI must be connected:
 * RunLive's steps on job_live (reaping, orphan rescue, schedules,
 * unblocking, promotion), then ApplyRetention's. The worker commits between
 * the two, so that the rows the first part promoted or requeued are not
 * held locked (a pickup skips them) while retention takes its time. */
Counts Run();
/* ReapStale is pqrun.reap_stale(): the stale jobs among the next window of
 * RUNNING jobs, where the last round or call stopped (all of them without
 * shared memory). */
int32 ReapStale(const Interval *default_stale_after);
Counts RunLive();
int64 ApplyRetention();
/* CountLive counts the unfinished jobs per queue and job type into
 * pqrun.live_counts (pqrun._count_live_jobs). */
void CountLive();

} // namespace pqrun::maintenance
