/* src/pg/plan_size.hpp — the planner never sizes a table of pqrun below 10
 * pages.
 *
 * pqrun's SQL statements are prepared once per backend and keep their
 * generic plans until an invalidation. A plan made while the statistics and
 * the file said a job table was empty (a VACUUM ANALYZE of a drained queue,
 * of a fresh install, of a new partition of job_done) costs a sequential
 * scan at nothing and keeps it while the table fills. Reproductions on
 * 0.22.0: in the W7 benchmark (64 waiting workers, job_live VACUUM
 * ANALYZEd empty before each cell), every look that found fewer jobs than
 * it asked for ran "pick due" as a sequential scan of job_live, which churn
 * keeps at hundreds of pages, and so did the SQL finish's DELETE ... WHERE
 * id = $1; in scans.sh on PostgreSQL 17, the partition of the day analyzed
 * empty made a cancel, a retry and the maintenance rounds read its rows by
 * sequential scans. PostgreSQL itself plans a table never vacuumed as 10
 * pages at least, for the same reason; pqrun's tables, which empty and
 * fill all day, are planned so always. Nothing else changes: the row
 * estimates, the indexes and what the plan does stay PostgreSQL's.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::plan_size {

/* OnRelationInfo raises the pages of `rel` (relation `relid`, about to be
 * planned) to the minimum when it is a table in pqrun's schema;
 * get_relation_info_hook. The parent of a partitioned table, which has no
 * pages of its own, is left as it is. */
void OnRelationInfo(Oid relid, bool inhparent, RelOptInfo *rel);

} // namespace pqrun::plan_size
