/* src/jobs/finish_direct.hpp — jobs finished below the executor.
 *
 * Finishing a job moves its row from job_live to job_done. Through SQL that
 * is a statement whose plan, CTE tuplestore, join and projection cost more
 * than the row move itself, so the common cases move rows with the table
 * access methods, as COPY and logical replication write rows:
 * - a batch picked up and finished in one subtransaction (deferred_claims.hpp):
 *   each locked READY row is fetched by ctid and goes in with one multi-row
 *   insert as its DONE attempt;
 * - a running job ended by mark_done (one or a batch), mark_error, the
 *   reaper or orphan rescue: its row is found by id as logical replication
 *   finds rows, then deleted and inserted as its finished attempt.
 * job_done's constraints are checked and its index entries made as the
 * executor would. When either table has what only the executor honours
 * (triggers, rules, row security, stored generated columns, a partition,
 * another access method), or the job needs its FIFO group lock, nothing is
 * done here and the SQL path does it all.
 */
#pragma once

#include "pg/pg.hpp"

#include "jobs/job_status.hpp"

namespace pqrun::finish_direct {

/* One job moved to job_done; queue and job_type are palloc'd copies. */
struct Moved {
	int64 id;
	bool has_dependents;
	char *queue;
	char *job_type;
	int64 duration_ms;
};

/* How a running attempt ends: status (DONE or FAILED), outcome, error
 * (nullptr keeps the row's last_error) and result. */
struct Ending {
	JobStatus status;
	const char *outcome;
	const char *error;
	Datum result;
	bool result_null;
};

/* FinishDeferred finishes the deferred claims among `ids` (with matching
 * `leases` when given) that deferred_claims::TakeForFinish hands over, into
 * `out` (room for n), and answers how many. */
int FinishDeferred(int n, const Datum *ids, const Datum *leases, Moved *out);

/* FinishRunning moves running job `job_id` (holding `lease` when given, and
 * in no FIFO group) to job_done as `ending` says, the way FinishDeferred
 * moves rows, and fills `out`. Answers false, having written nothing, when
 * it cannot: the job is not running, holds another lease or is in a FIFO
 * group, the tables need the executor, or the isolation level needs the
 * SQL path's serialization checks. */
bool FinishRunning(int64 job_id, const pg_uuid_t *lease, const Ending &ending, Moved *out);

/* FinishRunningEach does what FinishRunning does for each of `ids` in turn
 * (leases[i] nullptr: unfenced), with the tables, layout and writer set up
 * once; the jobs it moved fill `out` in that order. Answers how many, or -1
 * when the tables need the executor (nothing moved). The caller passes the
 * ids in id order, the order in which every transaction locks several jobs. */
int FinishRunningEach(int n, const int64 *ids, const pg_uuid_t *const *leases, const Ending &ending, Moved *out);

} // namespace pqrun::finish_direct
