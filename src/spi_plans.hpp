/* src/spi_plans.hpp — every SQL statement pqrun runs through SPI.
 *
 * Statements are prepared lazily once per backend, kept (SPI_keepplan) and
 * re-planned by PostgreSQL's plan cache after DDL. Callers must be connected
 * to SPI.
 */
#pragma once

#include "pg.hpp"

namespace pqrun::spi {

enum class Stmt {
	kInsertLive,
	kInsertLiveKeyless,
	kInsertLiveRun,
	kInsertCancelled,
	kLockLiveDeps,
	kFinishedDeps,
	kInsertEdges,
	kFifoLock,
	kFifoBusy,
	kPromoteDue,
	kReadyExists,
	kNextDelayed,
	kPick,
	kPickTypes,
	kPickQueues,
	kPickTypesQueues,
	kPickDue,
	kLockPick,
	kLockPickTypes,
	kLockPickQueues,
	kLockPickTypesQueues,
	kWriteDeferredClaims,
	kPickHead,
	kFinishRunning,
	kFinishRunningBatch,
	kFinishAny,
	kLockRunning,
	kFifoKeyOf,
	kRequeue,
	kHeartbeat,
	kJobState,
	kDropEdgesOf,
	kTakeDependents,
	kBlockedFifoKey,
	kLockBlocked,
	kReleaseIfFree,
	kFifoHead,
	kStale,
	kLockStale,
	kRetryFinished,
	kDedupeHolder,
	kLiveByDedupe,
	kPurge,
	kStrandedEdges,
	kStrandedBlocked,
	kRunningHolders,
	kLockOrphan,
	kIdsAhead,
	kRetention,
	kFinishedCounts,
	kCountersFromTables,
	kScheduleUpsert,
	kScheduleRemove,
	kScheduleDue,
	kScheduleFired,
	kScheduleSkipped,
	kCount,
};

/* Connect and Finish pair SPI_connect/SPI_finish, raising on failure. */
void Connect();
void Finish();

/* Exec runs `stmt` with `values`/`nulls` (nulls as in SPI: ' ' or 'n'),
 * raising an internal error unless SPI answers `expected_rc`. Returns
 * SPI_processed; rows are in SPI_tuptable. */
uint64 Exec(Stmt stmt, Datum *values, const char *nulls, int expected_rc, long count = 0);

/* ExecInto runs the SELECT `stmt` like Exec but sends its rows to `dest` as
 * the executor makes them, instead of copying them into SPI_tuptable. */
uint64 ExecInto(Stmt stmt, Datum *values, const char *nulls, DestReceiver *dest);

} // namespace pqrun::spi
