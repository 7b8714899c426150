/* src/guc.cpp — every pqrun.* setting.
 *
 * Time settings carry units so users may write '1s' or '20min'. Settings that
 * change how other roles' jobs are treated are superuser-only; the worker
 * loop's timing is reloadable (SIGHUP).
 */
#include "guc.hpp"

#include "pg/pg.hpp"

bool pqrun_enabled = true;
int pqrun_reap_interval = 1000;
int pqrun_count_interval = 10000;
int pqrun_stale_timeout = 20 * 60;
bool pqrun_orphan_rescue = true;
int pqrun_claim_hold = PQRUN_HOLD_LEASE;
char *pqrun_backoff = nullptr;
char *pqrun_cron_timezone = nullptr;
int pqrun_retention = 7 * 24 * 3600;
int pqrun_failed_retention = -1;
int pqrun_history_interval = 24 * 3600;
int pqrun_max_payload_bytes = 1024 * 1024;
bool pqrun_notify = false;
bool pqrun_synchronous_pickup = false;
bool pqrun_deferred_claims = true;
int pqrun_malloc_trim_threshold = 4096;

namespace pqrun::guc {

namespace {

const struct config_enum_entry kClaimHolds[] = {
    {"lease", PQRUN_HOLD_LEASE, false}, {"session", PQRUN_HOLD_SESSION, false}, {nullptr, 0, false}};

/* The schedule parsed by the check hook; points into GUC-owned `extra`. */
const backoff::Schedule *current_backoff = nullptr;

bool
CheckBackoff(char **newval, void **extra, GucSource source)
{
	backoff::Schedule parsed;
	char error[256];
	if (!backoff::Parse(*newval ? *newval : "", &parsed, error, sizeof(error))) {
		GUC_check_errdetail("%s", error);
		return false;
	}
	auto *copy = static_cast<backoff::Schedule *>(compat::GucExtraAlloc(sizeof(backoff::Schedule)));
	if (copy == nullptr)
		return false;
	*copy = parsed;
	*extra = copy;
	return true;
}

void
AssignBackoff(const char *newval, void *extra)
{
	current_backoff = static_cast<const backoff::Schedule *>(extra);
}

/* CheckCronTimezone refuses a zone that schedules could not be evaluated
 * in, as the server's own TimeZone setting does. */
bool
CheckCronTimezone(char **newval, void **extra, GucSource source)
{
	const char *name = *newval ? *newval : "";
	pg_tz *tz = name[0] != '\0' ? pg_tzset(name) : nullptr;
	if (tz == nullptr) {
		GUC_check_errmsg("time zone \"%s\" not recognized", name);
		return false;
	}
	if (!pg_tz_acceptable(tz)) {
		GUC_check_errmsg("time zone \"%s\" appears to use leap seconds", name);
		GUC_check_errdetail("PostgreSQL does not support leap seconds.");
		return false;
	}
	return true;
}

} // namespace

int
PinSearchPath()
{
	int nest_level = NewGUCNestLevel();
	(void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
	                        false);
	return nest_level;
}

void
Unpin(int nest_level)
{
	AtEOXact_GUC(true, nest_level);
}

const backoff::Schedule &
Backoff()
{
	static const backoff::Schedule kEmpty{};
	return current_backoff ? *current_backoff : kEmpty;
}

void
Define()
{
	DefineCustomBoolVariable("pqrun.enabled", gettext_noop("Runs pqrun's background maintenance."),
	                         gettext_noop("When off, the background workers stay idle."), &pqrun_enabled, true,
	                         PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
	DefineCustomIntVariable("pqrun.reap_interval", gettext_noop("Time between two maintenance rounds of a worker."),
	                        nullptr, &pqrun_reap_interval, 1000, 10, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr,
	                        nullptr, nullptr);
	DefineCustomIntVariable("pqrun.count_interval",
	                        gettext_noop("Least time between two counts of the unfinished jobs (pqrun.queue_overview)."),
	                        gettext_noop("A count that took t waits 20 t at least; 0 turns counting off."),
	                        &pqrun_count_interval, 10000, 0, 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr,
	                        nullptr);
	DefineCustomIntVariable(
	    "pqrun.stale_timeout", gettext_noop("Default stale window for running jobs without timeout_seconds."), nullptr,
	    &pqrun_stale_timeout, 20 * 60, 1, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
	DefineCustomBoolVariable("pqrun.orphan_rescue",
	                         gettext_noop("Puts back running jobs held by a session that has exited."),
	                         gettext_noop("Only claims made under pqrun.claim_hold = session are held by a session."),
	                         &pqrun_orphan_rescue, true, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
	DefineCustomEnumVariable("pqrun.claim_hold", gettext_noop("What holds the jobs this session claims."),
	                         gettext_noop("lease: the claim lasts until the job is finished, given back or cancelled, "
	                                      "or its stale window passes, whatever becomes of the connection; session: "
	                                      "also until the claiming session ends (orphan rescue)."),
	                         &pqrun_claim_hold, PQRUN_HOLD_LEASE, kClaimHolds, PGC_USERSET, 0, nullptr, nullptr,
	                         nullptr);
	DefineCustomStringVariable("pqrun.backoff", gettext_noop("Retry delays by attempt number; the last one repeats."),
	                           nullptr, &pqrun_backoff, "1min,5min,30min,2h,6h", PGC_SUSET, 0, CheckBackoff,
	                           AssignBackoff, nullptr);
	DefineCustomStringVariable("pqrun.cron_timezone", gettext_noop("Time zone in which cron schedules are evaluated."),
	                           nullptr, &pqrun_cron_timezone, "UTC", PGC_SUSET, 0, CheckCronTimezone, nullptr, nullptr);
	DefineCustomIntVariable(
	    "pqrun.retention", gettext_noop("Finished jobs older than this are deleted (0 keeps them)."), nullptr,
	    &pqrun_retention, 7 * 24 * 3600, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
	DefineCustomIntVariable("pqrun.failed_retention",
	                        gettext_noop("FAILED jobs older than this are deleted (0 keeps them, -1 as pqrun.retention)."),
	                        nullptr, &pqrun_failed_retention, -1, -1, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr,
	                        nullptr);
	DefineCustomIntVariable("pqrun.history_interval",
	                        gettext_noop("Time span of each partition of finished jobs the workers make."), nullptr,
	                        &pqrun_history_interval, 24 * 3600, 60, 366 * 24 * 3600, PGC_SIGHUP, GUC_UNIT_S, nullptr,
	                        nullptr, nullptr);
	DefineCustomIntVariable("pqrun.max_payload_bytes", gettext_noop("Largest accepted job payload, in bytes."), nullptr,
	                        &pqrun_max_payload_bytes, 1024 * 1024, 0, INT_MAX, PGC_SUSET, GUC_UNIT_BYTE, nullptr,
	                        nullptr, nullptr);
	DefineCustomBoolVariable("pqrun.notify",
	                         gettext_noop("Sends NOTIFY pqrun_jobs when a transaction makes jobs ready."),
	                         gettext_noop("Any role that can connect to the database can LISTEN and read the queue "
	                                      "names, and PostgreSQL serializes the commits of notifying transactions; "
	                                      "long polls are woken without it."),
	                         &pqrun_notify, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
	DefineCustomBoolVariable(
	    "pqrun.synchronous_pickup",
	    gettext_noop("Makes a transaction that did nothing but claim jobs wait for its commit to "
	                 "reach disk."),
	    gettext_noop("Off, such a transaction commits asynchronously: a crash may forget the claim, "
	                 "and the job is then picked up again, as orphan rescue would do after any "
	                 "crash. Transactions that wrote anything else are never affected."),
	    &pqrun_synchronous_pickup, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
	DefineCustomBoolVariable("pqrun.deferred_claims",
	                         gettext_noop("Lets a pickup lock its jobs and write their claims only when needed."),
	                         gettext_noop("Jobs that mark_done_batch finishes before anything reads the queue are "
	                                      "then written once instead of twice; off, every pickup writes its claims "
	                                      "at once."),
	                         &pqrun_deferred_claims, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
	/* A restart-only setting can only be defined while the postmaster loads
	 * the library; loaded later, pqrun leaves malloc alone. */
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable(
		    "pqrun.malloc_trim_threshold",
		    gettext_noop("Free heap a backend keeps instead of returning it to the kernel (glibc), 0 to "
		                 "leave glibc's default."),
		    gettext_noop("glibc returns the top of the heap after every statement that freed more "
		                 "than 128kB, and pays page faults to take it back on the next one."),
		    &pqrun_malloc_trim_threshold, 4096, 0, 1024 * 1024, PGC_POSTMASTER, GUC_UNIT_KB, nullptr, nullptr, nullptr);
	MarkGUCPrefixReserved("pqrun");
}

} // namespace pqrun::guc
