/* src/jobs/pick_sql.hpp — the select lists of the SQL picks (pick.cpp,
 * pick_lanes.cpp): a claimed job as pqrun.jobs shows it. */
#pragma once

#include "jobs/job_row.hpp"

/* Columns of pqrun.jobs, in the view's order (job_row.hpp), from a job_live
 * row a claim updated, and from one a locking pick left as it is. */
#define LIVE_AS_JOB                                                                                                    \
	"id, queue, job_type, payload, status, priority, attempts, max_attempts, run_after, timeout_seconds, "             \
	"locked_at, locked_by, lease_token, dedupe_key, fifo_key, depends_on, last_error, "                                \
	"NULL::timestamptz, NULL::int, NULL::jsonb, created_at, updated_at" PQRUN_JOB_CONTROLS " "
#define LOCKED_AS_JOB                                                                                                  \
	"id, queue, job_type, payload, 'RUNNING'::pqrun.job_status, priority, attempts + 1, max_attempts,"                 \
	"   run_after, timeout_seconds, $7::timestamptz, $1::text, " PQRUN_LEASE_TOKEN ", dedupe_key, fifo_key,"           \
	"   depends_on, last_error, NULL::timestamptz, NULL::int, NULL::jsonb, created_at, "                               \
	"$7::timestamptz" PQRUN_JOB_CONTROLS
static_assert(pqrun::job_row::SelectListIs(LIVE_AS_JOB, false, ""), "LIVE_AS_JOB must list job_row::kColumns");
static_assert(pqrun::job_row::SelectListIs(LOCKED_AS_JOB, true, ""), "LOCKED_AS_JOB must list job_row::kColumns");

/* The (queue, job_type) pairs $N (flow_control::BlockedPairs; NULL: none)
 * whose jobs are not claimed. */
#define PQRUN_NOT_BLOCKED_PAIR(param)                                                                                  \
	" AND (" param "::text[] IS NULL"                                                                                   \
	" OR (pg_catalog.octet_length(queue)::text || ':' || queue || job_type) <> ALL (" param "))"
