/* src/pg/plan_size.hpp — the planner never sizes pqrun.job_live below 10
 * pages.
 *
 * pqrun's SQL statements are prepared once per backend and keep their
 * generic plans until an invalidation. A plan made while the statistics and
 * the file said job_live was empty (a VACUUM ANALYZE of a drained queue, or
 * of a fresh install) costs a sequential scan at nothing and keeps it while
 * the table fills. Reproduction on 0.22.0: in the W7 benchmark (64 waiting
 * workers, job_live VACUUM ANALYZEd empty before each cell), every look
 * that found fewer jobs than it asked for ran "pick due" as a sequential
 * scan of job_live, which churn keeps at hundreds of pages, and so did the
 * SQL finish's DELETE ... WHERE id = $1 (planner.sh's test). PostgreSQL
 * itself plans a table never vacuumed as 10 pages at least, for the same
 * reason; job_live, which empties and fills all day, is planned so always.
 * Nothing else changes: the row estimates, the indexes and what the plan
 * does stay PostgreSQL's.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun::plan_size {

/* OnRelationInfo raises the pages of `rel` (relation `relid`, about to be
 * planned) to the minimum when it is job_live; get_relation_info_hook. */
void OnRelationInfo(Oid relid, RelOptInfo *rel);

/* OnRelcacheInvalidation forgets job_live's OID when it (or every
 * relation) is invalidated, and an answer that it does not exist at any
 * invalidation (a CREATE EXTENSION creates it). */
void OnRelcacheInvalidation(Oid relid);

} // namespace pqrun::plan_size
