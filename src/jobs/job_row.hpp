/* src/jobs/job_row.hpp — a job's row, described once: every column of
 * pqrun.job_live, pqrun.job_done and the pqrun.jobs view, and what each
 * operation does with it.
 *
 * For each column: its name and type, which tables have it, the value a
 * pickup returns for it (pqrun.jobs order first), what a claim writes to it
 * in job_live, and what a finish writes to it in job_done, from a deferred
 * claim and from a running row. Derived from or checked against this table:
 *  - the one decision between the paths (direct_rows.cpp) compares both
 *    tables' columns, names and types, with it at run time, and leaves every
 *    operation to SQL when the installed tables differ;
 *  - the SQL statements (each beside the code that runs it) at compile
 *    time, by static_assert: the select lists of the claims and locking
 *    picks, the SET lists of the claims, the insert list of the enqueue,
 *    and the insert and select lists of the finish;
 *  - the direct paths' layouts: the pick's output (pick_direct.cpp, also
 *    checked against the installed pqrun.pickup's result), the columns a
 *    written claim sets (claim_direct.cpp), an enqueue's columns
 *    (enqueue_direct.cpp) and a finish's job_done row (finish_direct.cpp);
 *  - the pickup's reading of each claimed row (pick.cpp);
 *  - every other statement that copies, writes or resets whole rows, by
 *    ListIs and SetsAll: retry's copy back to job_live (operate.cpp), a
 *    cancelled enqueue's job_done row and enqueue_batch's plain elements
 *    (enqueue.cpp), and what gives a running job back (requeue.cpp), each
 *    naming the columns it leaves to their defaults.
 * A column added to a job table goes here first (with the table's file in
 * sql/pqrun/tables/ and the update script); the compiler then points at each statement that must
 * list it, and a job_done column that no finish fills does not compile.
 */
#pragma once

#include "pg/spi_plans.hpp"

#include <initializer_list>

namespace pqrun::job_row {

/* The tables that have a column. */
enum Table : unsigned {
	kLive = 1, /* pqrun.job_live */
	kDone = 2, /* pqrun.job_done */
};

/* The value a pickup returns for a pqrun.jobs column. */
enum class Picked {
	kColumn,      /* job_live's column of the same name */
	kRunning,     /* the status RUNNING */
	kNextAttempt, /* job_live.attempts + 1 */
	kAt,          /* the claim's time */
	kWorker,      /* the claiming worker */
	kToken,       /* a new lease token */
	kNull,        /* finished jobs only */
};

/* What a claim writes to a job_live column. */
enum class Claimed {
	kKeep,         /* unchanged */
	kRunning,      /* RUNNING */
	kFalse,        /* false */
	kNextAttempt,  /* attempts + 1 */
	kAt,           /* the claim's time */
	kWorker,       /* the claiming worker */
	kToken,        /* the claim's lease token */
	kNull,         /* NULL */
	kPid,          /* the claiming session's process id, when it holds the claim (Claims::by_session) */
	kSessionStart, /* the claiming session's start, likewise */
};

/* What a finish writes to a job_done column. */
enum class Finished {
	kKeep,     /* job_live's column of the same name */
	kStatus,   /* the final status */
	kAttempts, /* the claim's attempt (attempts + 1) */
	kDuration, /* milliseconds since the attempt started */
	kLockedAt, /* the claim's time */
	kNow,      /* the transaction's start */
	kToken,    /* the claim's lease token */
	kWorker,   /* the claiming worker */
	kOutcome,  /* the attempt's outcome */
	kError,    /* the error given, else job_live's last_error */
	kResult,   /* the result given */
	kCount
};

struct Column {
	const char *name;
	Oid type; /* InvalidOid: pqrun.job_status */
	unsigned tables;
	bool enqueued; /* an enqueue sets it (INSERT_LIVE's column list) */
	/* pqrun.jobs columns: the value a pickup returns, and the expressions
	 * of the SQL claim that updates the row and returns it (pick.cpp's
	 * CLAIM) and of the locking pick that leaves it as it is (LOCK_PICK,
	 * whose parameters are $1 the worker, $7 the time). */
	Picked picked;
	const char *claimed_sql;
	const char *locked_sql;
	/* job_live columns: what a claim writes. */
	Claimed claim;
	/* job_done columns: what finishing a deferred claim and a running row
	 * write, and the SQL finish's expression (finish.cpp's
	 * FINISH_FROM_GONE; nullptr: the column of the same name). */
	Finished from_claim;
	Finished from_running;
	const char *finish_sql;
};

/* pqrun.jobs columns, in the view's order, then the tables' other ones. */
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
	kProgress,
	kSnoozes,
	kConcurrencyKey,
	kRateWeight,
	kJobsCount, /* the columns of pqrun.jobs end here */
	kDelayed = kJobsCount,
	kHasDependents,
	kHolderPid,
	kHeartbeatAt,
	kHolderStarted,
	kOutcome,
	kCount
};

/* The SQL finish's duration of a running attempt; finish_direct.cpp's
 * DurationMs computes the same in C. */
#define PQRUN_DURATION_MS                                                                                              \
	"CASE WHEN status = 'RUNNING' THEN"                                                                                \
	"  LEAST(GREATEST(pg_catalog.date_part('epoch', pg_catalog.now() - locked_at), 0) * 1000, 2147483647)::int"        \
	" END"

namespace detail {
constexpr unsigned kBoth = kLive | kDone;
constexpr Picked kCol = Picked::kColumn;
constexpr Claimed kKeepLive = Claimed::kKeep;
constexpr Finished kKeepDone = Finished::kKeep;
} // namespace detail

// clang-format off
inline constexpr Column kColumns[kCount] = {
	/* name              type            tables                 enqueued picked                claimed_sql           locked_sql                     claim                   from_claim             from_running           finish_sql */
	{"id",              INT8OID,        detail::kBoth,          false, detail::kCol,          "id",                 "id",                          detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"queue",           TEXTOID,        detail::kBoth,          true,  detail::kCol,          "queue",              "queue",                       detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"job_type",        TEXTOID,        detail::kBoth,          true,  detail::kCol,          "job_type",           "job_type",                    detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"payload",         JSONBOID,       detail::kBoth,          true,  detail::kCol,          "payload",            "payload",                     detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"status",          InvalidOid,     detail::kBoth,          true,  Picked::kRunning,      "status",             "'RUNNING'::pqrun.job_status", Claimed::kRunning,      Finished::kStatus,     Finished::kStatus,     "$3::pqrun.job_status"},
	{"priority",        INT4OID,        detail::kBoth,          true,  detail::kCol,          "priority",           "priority",                    detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"attempts",        INT4OID,        detail::kBoth,          false, Picked::kNextAttempt,  "attempts",           "attempts + 1",                Claimed::kNextAttempt,  Finished::kAttempts,   detail::kKeepDone,     nullptr},
	{"max_attempts",    INT4OID,        detail::kBoth,          true,  detail::kCol,          "max_attempts",       "max_attempts",                detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"run_after",       TIMESTAMPTZOID, detail::kBoth,          true,  detail::kCol,          "run_after",          "run_after",                   detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"timeout_seconds", INT4OID,        detail::kBoth,          true,  detail::kCol,          "timeout_seconds",    "timeout_seconds",             detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"locked_at",       TIMESTAMPTZOID, detail::kBoth,          false, Picked::kAt,           "locked_at",          "$7::timestamptz",             Claimed::kAt,           Finished::kLockedAt,   detail::kKeepDone,     nullptr},
	{"locked_by",       TEXTOID,        detail::kBoth,          false, Picked::kWorker,       "locked_by",          "$1::text",                    Claimed::kWorker,       Finished::kWorker,     detail::kKeepDone,     nullptr},
	{"lease_token",     UUIDOID,        detail::kBoth,          false, Picked::kToken,        "lease_token",        PQRUN_LEASE_TOKEN,             Claimed::kToken,        Finished::kToken,      detail::kKeepDone,     nullptr},
	{"dedupe_key",      TEXTOID,        detail::kBoth,          true,  detail::kCol,          "dedupe_key",         "dedupe_key",                  detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"fifo_key",        TEXTOID,        detail::kBoth,          true,  detail::kCol,          "fifo_key",           "fifo_key",                    detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"depends_on",      INT8ARRAYOID,   detail::kBoth,          true,  detail::kCol,          "depends_on",         "depends_on",                  detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"last_error",      TEXTOID,        detail::kBoth,          false, detail::kCol,          "last_error",         "last_error",                  detail::kKeepLive,      detail::kKeepDone,     Finished::kError,      "COALESCE($5, last_error)"},
	{"finished_at",     TIMESTAMPTZOID, kDone,                  false, Picked::kNull,         "NULL::timestamptz",  "NULL::timestamptz",           detail::kKeepLive,      Finished::kNow,        Finished::kNow,        "pg_catalog.now()"},
	{"duration_ms",     INT4OID,        kDone,                  false, Picked::kNull,         "NULL::int",          "NULL::int",                   detail::kKeepLive,      Finished::kDuration,   Finished::kDuration,   PQRUN_DURATION_MS},
	{"result",          JSONBOID,       kDone,                  false, Picked::kNull,         "NULL::jsonb",        "NULL::jsonb",                 detail::kKeepLive,      Finished::kResult,     Finished::kResult,     "$6"},
	{"created_at",      TIMESTAMPTZOID, detail::kBoth,          true,  detail::kCol,          "created_at",         "created_at",                  detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"updated_at",      TIMESTAMPTZOID, detail::kBoth,          true,  Picked::kAt,           "updated_at",         "$7::timestamptz",             Claimed::kAt,           Finished::kNow,        Finished::kNow,        "pg_catalog.now()"},
	{"progress",        JSONBOID,       detail::kBoth,          false, detail::kCol,          "progress",           "progress",                    detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"snoozes",         INT4OID,        detail::kBoth,          false, detail::kCol,          "snoozes",            "snoozes",                     detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"concurrency_key", TEXTOID,        detail::kBoth,          true,  detail::kCol,          "concurrency_key",    "concurrency_key",             detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"rate_weight",     INT4OID,        detail::kBoth,          true,  detail::kCol,          "rate_weight",        "rate_weight",                 detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	/* Not in pqrun.jobs. */
	{"delayed",         BOOLOID,        kLive,                  true,  Picked::kNull,         nullptr,              nullptr,                       Claimed::kFalse,        detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"has_dependents",  BOOLOID,        kLive,                  false, Picked::kNull,         nullptr,              nullptr,                       detail::kKeepLive,      detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"holder_pid",      INT4OID,        kLive,                  false, Picked::kNull,         nullptr,              nullptr,                       Claimed::kPid,          detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"heartbeat_at",    TIMESTAMPTZOID, kLive,                  false, Picked::kNull,         nullptr,              nullptr,                       Claimed::kNull,         detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"holder_started",  TIMESTAMPTZOID, kLive,                  false, Picked::kNull,         nullptr,              nullptr,                       Claimed::kSessionStart, detail::kKeepDone,     detail::kKeepDone,     nullptr},
	{"outcome",         TEXTOID,        kDone,                  false, Picked::kNull,         nullptr,              nullptr,                       detail::kKeepLive,      Finished::kOutcome,    Finished::kOutcome,    "CASE WHEN status = 'RUNNING' THEN $4 END"},
};
// clang-format on

/* Index of the column named `name`, or -1 (constant-evaluated). */
constexpr int
Find(const char *name)
{
	for (int i = 0; i < kCount; i++) {
		int c = 0;
		while (kColumns[i].name[c] != '\0' && kColumns[i].name[c] == name[c])
			c++;
		if (kColumns[i].name[c] == '\0' && name[c] == '\0')
			return i;
	}
	return -1;
}

constexpr bool
In(int i, Table table)
{
	return (kColumns[i].tables & table) != 0;
}

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

/* Reads the comma-separated list in `text` from `at`: each item must be
 * `item(i)` for the next column i that `wanted` selects, in table order;
 * answers where the list ends (after its last item), or -1. */
template <typename Wanted, typename Item>
constexpr int
ReadList(const char *text, int at, Wanted wanted, Item item)
{
	bool first = true;
	for (int i = 0; i < kCount; i++) {
		if (!wanted(i))
			continue;
		at = Skip(text, at);
		if (!first) {
			if (text[at] != ',')
				return -1;
			at = Skip(text, at + 1);
		}
		first = false;
		const char *expr = item(i);
		if (!Follows(text, at, expr))
			return -1;
		at += Length(expr);
	}
	return at;
}

/* ReadName reads the column name in `text` at `at` (white space first) into
 * `*column` (-1: not a column) and answers where it ends. */
constexpr int
ReadName(const char *text, int at, int *column)
{
	at = Skip(text, at);
	int start = at;
	while (text[at] == '_' || (text[at] >= 'a' && text[at] <= 'z'))
		at++;
	char name[32] = {};
	for (int c = start; c < at && c - start < 31; c++)
		name[c - start] = text[c];
	*column = at - start < 31 ? Find(name) : -1;
	return at;
}

/* Names the columns `wanted` selects, each once, in any order: a list of
 * names (`assign` false) or of assignments `name = expression` (true),
 * separated by commas and ended by `end` outside parentheses; with
 * `others`, other columns too. */
template <typename Wanted>
constexpr bool
NamesExactly(const char *text, int at, bool assign, const char *end, Wanted wanted, bool others = false)
{
	bool seen[kCount] = {};
	for (;;) {
		int i = -1;
		at = ReadName(text, at, &i);
		if (i < 0 || seen[i] || (!wanted(i) && !others))
			return false;
		seen[i] = true;
		at = Skip(text, at);
		if (assign && text[at++] != '=')
			return false;
		for (int depth = 0;; at++) {
			if (text[at] == '\0' ||
			    (!assign && depth == 0 && !IsSpace(text[at]) && text[at] != ',' && !Follows(text, at, end)))
				return false;
			if (depth == 0 && Follows(text, at, end)) {
				for (int j = 0; j < kCount; j++)
					if (wanted(j) && !seen[j])
						return false;
				return true;
			}
			if (depth == 0 && text[at] == ',')
				break;
			depth += text[at] == '(' ? 1 : text[at] == ')' ? -1 : 0;
		}
		at++;
	}
}

/* The position right after the first `word` in `text`, or -1. */
constexpr int
After(const char *text, const char *word)
{
	for (int at = 0; text[at] != '\0'; at++)
		if (Follows(text, at, word))
			return at + Length(word);
	return -1;
}

} // namespace detail

/* SelectListIs answers whether `text` (from its start, white space aside)
 * is the select list of a claimed job: every pqrun.jobs column's expression
 * of the kind `locked` names, in order, then `rest`. */
constexpr bool
SelectListIs(const char *text, bool locked, const char *rest)
{
	int at = detail::ReadList(
	    text, 0, [](int i) { return i < kJobsCount; },
	    [locked](int i) { return locked ? kColumns[i].locked_sql : kColumns[i].claimed_sql; });
	return at >= 0 && detail::Follows(text, detail::Skip(text, at), rest);
}

/* ClaimSets answers whether the SET list of the UPDATE in `text` (after its
 * first "SET ", up to `end`) assigns exactly the columns a claim writes. */
constexpr bool
ClaimSets(const char *text, const char *end)
{
	int at = detail::After(text, "SET ");
	return at >= 0 && detail::NamesExactly(text, at, true, end,
	                                       [](int i) { return In(i, kLive) && kColumns[i].claim != Claimed::kKeep; });
}

/* EnqueueListIs answers whether `text`, after its first `(`, names the
 * columns an enqueue sets (in any order) up to `)`. */
constexpr bool
EnqueueListIs(const char *text)
{
	int at = detail::After(text, "(");
	return at >= 0 && detail::NamesExactly(text, at, false, ")", [](int i) { return kColumns[i].enqueued; });
}

/* FinishIs answers whether `insert` lists job_done's columns and `select`
 * each one's finish_sql (or its name), in table order. */
constexpr bool
FinishIs(const char *insert, const char *select)
{
	auto done = [](int i) { return In(i, kDone); };
	int at = detail::ReadList(insert, 0, done, [](int i) { return kColumns[i].name; });
	int sat = detail::ReadList(
	    select, 0, done, [](int i) { return kColumns[i].finish_sql ? kColumns[i].finish_sql : kColumns[i].name; });
	return at >= 0 && insert[detail::Skip(insert, at)] == '\0' && sat >= 0 && select[detail::Skip(select, sat)] == '\0';
}

/* A set of columns: bit i stands for kColumns[i]. */
using Columns = uint64;
static_assert(kCount <= 64, "job_row::Columns holds 64 columns");

/* Named: the columns of `names`; every column when one is not a column, so
 * that a misspelt name fails the check it is given to. */
constexpr Columns
Named(std::initializer_list<const char *> names)
{
	Columns set = 0;
	for (const char *name : names) {
		int i = Find(name);
		if (i < 0)
			return ~Columns{0};
		set |= Columns{1} << i;
	}
	return set;
}

/* InTable: the columns `table` has. */
constexpr Columns
InTable(Table table)
{
	Columns set = 0;
	for (int i = 0; i < kCount; i++)
		if (In(i, table))
			set |= Columns{1} << i;
	return set;
}

/* ClaimWrites: the job_live columns a claim writes, which whatever gives a
 * running job back must write again. */
constexpr Columns
ClaimWrites()
{
	Columns set = 0;
	for (int i = 0; i < kCount; i++)
		if (In(i, kLive) && kColumns[i].claim != Claimed::kKeep)
			set |= Columns{1} << i;
	return set;
}

/* Enqueued: the columns an enqueue sets. */
constexpr Columns
Enqueued()
{
	Columns set = 0;
	for (int i = 0; i < kCount; i++)
		if (kColumns[i].enqueued)
			set |= Columns{1} << i;
	return set;
}

/* ListIs answers whether the column list in `text` after the first `after`
 * names exactly the columns of `set` (in any order) up to `)`. A statement
 * that copies or writes whole rows checks its list with it against the
 * columns of a table less those it leaves to their defaults, named: a
 * column added to the table then does not compile until the statement
 * lists it or says it leaves it out. */
constexpr bool
ListIs(const char *text, const char *after, Columns set)
{
	int at = detail::After(text, after);
	return at >= 0 && detail::NamesExactly(text, at, false, ")", [set](int i) { return ((set >> i) & 1) != 0; });
}

/* SetsAll answers whether the SET list of the UPDATE in `text` (after its
 * first "SET ", up to `end`) assigns every column of `set`, others too. */
constexpr bool
SetsAll(const char *text, const char *end, Columns set)
{
	int at = detail::After(text, "SET ");
	return at >= 0 &&
	       detail::NamesExactly(text, at, true, end, [set](int i) { return ((set >> i) & 1) != 0; }, true);
}

/* What the table itself must hold: pqrun.jobs columns are in the view's
 * order above; a column only job_done has is filled by every finish; one
 * that is not in job_live is not picked from it; what a claim writes is a
 * job_live column. */
constexpr bool
Consistent()
{
	constexpr const char *kJobsOrder[kJobsCount] = {
	    "id",           "queue",      "job_type",        "payload",         "status",      "priority",    "attempts",
	    "max_attempts", "run_after",  "timeout_seconds", "locked_at",       "locked_by",   "lease_token", "dedupe_key",
	    "fifo_key",     "depends_on", "last_error",      "finished_at",     "duration_ms", "result",      "created_at",
	    "updated_at",   "progress",   "snoozes",         "concurrency_key", "rate_weight"};
	for (int i = 0; i < kJobsCount; i++)
		if (Find(kJobsOrder[i]) != i || kColumns[i].claimed_sql == nullptr || kColumns[i].locked_sql == nullptr)
			return false;
	for (int i = 0; i < kCount; i++) {
		const Column &c = kColumns[i];
		if (In(i, kDone) && !In(i, kLive) && (c.from_claim == Finished::kKeep || c.from_running == Finished::kKeep))
			return false;
		if (!In(i, kLive) && (c.picked == Picked::kColumn || c.picked == Picked::kNextAttempt ||
		                      c.claim != Claimed::kKeep || c.enqueued))
			return false;
		if (!In(i, kDone) && (c.from_claim != Finished::kKeep || c.from_running != Finished::kKeep))
			return false;
	}
	return true;
}
static_assert(Consistent(), "job_row::kColumns contradicts itself");

} // namespace pqrun::job_row
