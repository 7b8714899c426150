/* src/direct_finish.hpp — mark_done_batch of deferred claims, below the executor.
 *
 * A batch picked up and finished in one subtransaction (deferred_claims.hpp)
 * moves each locked READY row of job_live to job_done as its DONE attempt.
 * Through SQL that is a statement whose plan, CTE tuplestore, join and
 * projection cost more than the row moves themselves, so the rows are moved
 * with the table access methods, as COPY and logical replication write rows:
 * fetch by ctid, check job_done's constraints, one multi-row insert, index
 * entries, delete from job_live. When either table has what only the
 * executor honours (triggers, row security, stored generated columns, a
 * partition), nothing is taken: the claims are then written and finished by
 * mark_done_batch's SQL path.
 */
#pragma once

#include "pg.hpp"

namespace pqrun::direct_finish {

/* One job moved to job_done; queue and job_type are palloc'd copies. */
struct Moved {
	int64 id;
	bool has_dependents;
	char *queue;
	char *job_type;
	int64 duration_ms;
};

/* FinishDeferred finishes the deferred claims among `ids` (with matching
 * `leases` when given) that deferred_claims::TakeForFinish hands over, into
 * `out` (room for n), and answers how many. */
int FinishDeferred(int n, const Datum *ids, const Datum *leases, Moved *out);

} // namespace pqrun::direct_finish
