/* src/job_row.hpp — a claimed job as pickups return it: a row of
 * pqrun.jobs, described once.
 *
 * Every column of the row, in order: its name and type (as pqrun.pickup
 * returns them), where a claim takes its value from, and the SQL
 * expression of each pick statement for it. Derived from or checked against
 * this table:
 *  - the select lists of the SQL pickups (spi_plans.cpp: CLAIM's RETURNING
 *    side and LOCK_PICK), by static_assert at compile time;
 *  - the direct pick's output (direct_pick.cpp), which also checks names and
 *    types against the installed pqrun.pickup's result and leaves the pick
 *    to SQL when they differ;
 *  - the pickup's reading of each claimed row (pickup.cpp).
 * A column added to pqrun.jobs goes here first; the compiler then points at
 * each statement that does not list it.
 */
#pragma once

#include "pg.hpp"

namespace pqrun::job_row {

/* The lease token a claim issues (0.3.0; spi_plans.cpp's AsInstalled
 * replaces it on an older install). */
#define PQRUN_LEASE_TOKEN "pqrun._lease_token()"

/* Where a claimed job's value comes from. */
enum class Source {
	kColumn,      /* job_live's column of the same name */
	kRunning,     /* the status RUNNING */
	kNextAttempt, /* job_live.attempts + 1 */
	kAt,          /* the claim's time */
	kWorker,      /* the claiming worker */
	kToken,       /* a new lease token */
	kNull,        /* finished jobs only */
};

struct Column {
	const char *name;
	Oid type; /* InvalidOid: pqrun.job_status */
	Source source;
	/* The expression of the SQL claim that updates the row and returns it
	 * (spi_plans.cpp's CLAIM), and of the locking pick that leaves the row
	 * as it is (LOCK_PICK, whose parameters are $1 the worker, $7 the time). */
	const char *claimed_sql;
	const char *locked_sql;
};

enum Index : int {
	kId,
	kQueue,
	kJobType,
	kPayload,
	kStatus,
	kPriority,
	kAttempts,
	kMaxAttempts,
	kRunAfter,
	kTimeoutSeconds,
	kLockedAt,
	kLockedBy,
	kLeaseToken,
	kDedupeKey,
	kFifoKey,
	kDependsOn,
	kLastError,
	kFinishedAt,
	kDurationMs,
	kResult,
	kCreatedAt,
	kUpdatedAt,
	kCount
};

// clang-format off
inline constexpr Column kColumns[kCount] = {
	{"id",              INT8OID,        Source::kColumn,      "id",              "id"},
	{"queue",           TEXTOID,        Source::kColumn,      "queue",           "queue"},
	{"job_type",        TEXTOID,        Source::kColumn,      "job_type",        "job_type"},
	{"payload",         JSONBOID,       Source::kColumn,      "payload",         "payload"},
	{"status",          InvalidOid,     Source::kRunning,     "status",          "'RUNNING'::pqrun.job_status"},
	{"priority",        INT4OID,        Source::kColumn,      "priority",        "priority"},
	{"attempts",        INT4OID,        Source::kNextAttempt, "attempts",        "attempts + 1"},
	{"max_attempts",    INT4OID,        Source::kColumn,      "max_attempts",    "max_attempts"},
	{"run_after",       TIMESTAMPTZOID, Source::kColumn,      "run_after",       "run_after"},
	{"timeout_seconds", INT4OID,        Source::kColumn,      "timeout_seconds", "timeout_seconds"},
	{"locked_at",       TIMESTAMPTZOID, Source::kAt,          "locked_at",       "$7::timestamptz"},
	{"locked_by",       TEXTOID,        Source::kWorker,      "locked_by",       "$1::text"},
	{"lease_token",     UUIDOID,        Source::kToken,       "lease_token",     PQRUN_LEASE_TOKEN},
	{"dedupe_key",      TEXTOID,        Source::kColumn,      "dedupe_key",      "dedupe_key"},
	{"fifo_key",        TEXTOID,        Source::kColumn,      "fifo_key",        "fifo_key"},
	{"depends_on",      INT8ARRAYOID,   Source::kColumn,      "depends_on",      "depends_on"},
	{"last_error",      TEXTOID,        Source::kColumn,      "last_error",      "last_error"},
	{"finished_at",     TIMESTAMPTZOID, Source::kNull,        "NULL::timestamptz", "NULL::timestamptz"},
	{"duration_ms",     INT4OID,        Source::kNull,        "NULL::int",       "NULL::int"},
	{"result",          JSONBOID,       Source::kNull,        "NULL::jsonb",     "NULL::jsonb"},
	{"created_at",      TIMESTAMPTZOID, Source::kColumn,      "created_at",      "created_at"},
	{"updated_at",      TIMESTAMPTZOID, Source::kAt,          "updated_at",      "$7::timestamptz"},
};
// clang-format on

namespace detail {

constexpr bool
IsSpace(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

/* Skip: `text` from `at` past white space. */
constexpr int
Skip(const char *text, int at)
{
	while (IsSpace(text[at]))
		at++;
	return at;
}

/* Follows answers whether `text` at `at` reads `word`. */
constexpr bool
Follows(const char *text, int at, const char *word)
{
	for (int i = 0; word[i] != '\0'; i++)
		if (text[at + i] != word[i])
			return false;
	return true;
}

constexpr int
Length(const char *word)
{
	int n = 0;
	while (word[n] != '\0')
		n++;
	return n;
}

} // namespace detail

/* SelectListIs answers whether `text` (from its start, white space aside)
 * is the select list of a claimed job: every column's expression of the
 * kind `locked` names, in order, separated by commas, and then `rest`. */
constexpr bool
SelectListIs(const char *text, bool locked, const char *rest)
{
	int at = 0;
	for (int i = 0; i < kCount; i++) {
		const char *expr = locked ? kColumns[i].locked_sql : kColumns[i].claimed_sql;
		at = detail::Skip(text, at);
		if (!detail::Follows(text, at, expr))
			return false;
		at = detail::Skip(text, at + detail::Length(expr));
		if (i + 1 < kCount) {
			if (text[at] != ',')
				return false;
			at++;
		}
	}
	return detail::Follows(text, detail::Skip(text, at), rest);
}

} // namespace pqrun::job_row
