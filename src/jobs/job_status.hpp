/* src/jobs/job_status.hpp — a job's status, as the C++ passes it around.
 *
 * The values are the labels of the SQL enum pqrun.job_status, in its order.
 * The C++ only ever holds a JobStatus; a label is written or read only where
 * a status meets SQL: bound as a statement parameter (StatusName), read back
 * from a result column (ParseStatus), looked up as an enum label oid below
 * the executor (direct_rows::EnumLabel) or returned to an SQL caller.
 */
#pragma once

#include "pg/pg.hpp"

namespace pqrun {

enum class JobStatus { kBlocked, kReady, kRunning, kDone, kFailed, kCancelled };

/* StatusName answers the SQL label of `status` (a static string). */
constexpr const char *
StatusName(JobStatus status)
{
	switch (status) {
	case JobStatus::kBlocked:
		return "BLOCKED";
	case JobStatus::kReady:
		return "READY";
	case JobStatus::kRunning:
		return "RUNNING";
	case JobStatus::kDone:
		return "DONE";
	case JobStatus::kFailed:
		return "FAILED";
	case JobStatus::kCancelled:
		return "CANCELLED";
	}
	return "?";
}

/* ParseStatus answers the status of a label read back from SQL; any other
 * label (or NULL) is an internal error, impossible with a pqrun install. */
inline JobStatus
ParseStatus(const char *label)
{
	constexpr JobStatus kAll[] = {JobStatus::kBlocked, JobStatus::kReady,  JobStatus::kRunning,
	                              JobStatus::kDone,    JobStatus::kFailed, JobStatus::kCancelled};
	for (JobStatus status : kAll)
		if (label && strcmp(label, StatusName(status)) == 0)
			return status;
	elog(ERROR, "pqrun: unknown job status %s", label ? label : "NULL");
	pg_unreachable();
}

/* IsFinished: whether a job with `status` has finished (lives in job_done). */
constexpr bool
IsFinished(JobStatus status)
{
	return status == JobStatus::kDone || status == JobStatus::kFailed || status == JobStatus::kCancelled;
}

} // namespace pqrun
