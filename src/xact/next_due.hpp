/* src/xact/next_due.hpp — when the earliest delayed job of a database falls
 * due, so that pickups skip promoting delayed jobs until then.
 *
 * Kept in the database's slot of shared memory (shmem/wake_state.hpp).
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::next_due {

/* NoteDelayed records that a job becomes runnable at `run_after` with no
 * further event, so waiters can time their next look. */
void NoteDelayed(TimestampTz run_after);

/* Read answers when the earliest delayed job of this database falls due:
 * 0 when that is unknown (not computed since the server started), DT_NOEND
 * when there is none. It never exceeds the run_after of a committed delayed
 * job: commits that create one lower it, and it is only ever recomputed from
 * a snapshot taken after the value it replaces was read. So pickups may skip
 * promoting delayed jobs until then (only a manual UPDATE of run_after in
 * pqrun.job_live can outrun it, until the next maintenance round). */
TimestampTz Read();

/* Replace sets it to `due`, found by a query started after Read() answered
 * `seen`, unless a commit changed it meanwhile. */
void Replace(TimestampTz seen, TimestampTz due);

/* MayBeDue answers whether a delayed job may have fallen due. */
bool MayBeDue();

/* AtCommit lowers it to the earliest delayed job the transaction made, and
 * wakes a waiter to re-time its sleep (after wake's AtCommit); Forget drops
 * what the transaction noted (its end, committed or not). */
void AtCommit();
void Forget();

} // namespace pqrun::next_due
