/* src/jobs/claim_direct.hpp — claims written below the executor.
 *
 * A pickup locks its jobs with FOR UPDATE SKIP LOCKED and leaves their
 * claims to deferred_claims.hpp. Writing a claim is then the
 * update of one row this transaction holds locked, by its ctid: through SQL
 * that is a statement (plan, join on the ids, projection) costing more than
 * the update itself, so the common case updates the rows with the table
 * access method, as logical replication applies an update: the new version
 * is checked against job_live's constraints and given its index entries as
 * the executor would. Where direct_rows::GoDirect declines (what only
 * the executor enforces: see there), nothing is written here and the SQL
 * path writes the claims.
 */
#pragma once

#include "xact/claims.hpp"

namespace pqrun::claim_direct {

/* Write writes `claims` (made at `at` by `worker` on pqrun's job_live in
 * schema `namespace_id`): each locked READY row becomes its RUNNING version.
 * Answers false, having written nothing, when the SQL path must do it. */
bool Write(const Claims &claims, TimestampTz at, const char *worker, Oid namespace_id);

} // namespace pqrun::claim_direct
