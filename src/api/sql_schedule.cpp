/* src/api/sql_schedule.cpp — the SQL-callable functions of periodic schedules.
 *
 * pqrun.schedule, pqrun.unschedule and pqrun.cron_next, plus two internal
 * functions for operators and tests (pqrun._fire_due_schedules and
 * pqrun._run_every_next, not granted to PUBLIC). Each entry point unpacks its
 * arguments, calls schedule:: and packs the result, like sql_api.cpp.
 */
#include "jobs/cron_zone.hpp"
#include "jobs/schedule.hpp"
#include "pg/boundary.hpp"
#include "pg/spi_plans.hpp"

namespace {

using namespace pqrun;

using spi::Connect;
using spi::Finish;

} // namespace

PQRUN_FUNCTION(pqrun_schedule)
{
	schedule::ScheduleArgs args;
	for (int i = 0; i < schedule::kScheduleArgCount; i++) {
		args.isnull[i] = PG_ARGISNULL(i);
		args.value[i] = args.isnull[i] ? Datum(0) : PG_GETARG_DATUM(i);
	}
	Connect();
	schedule::Upsert(args);
	Finish();
	PG_RETURN_VOID();
}

PQRUN_FUNCTION(pqrun_unschedule)
{
	if (PG_ARGISNULL(0))
		RaiseInvalid("name must not be null");
	if (PG_ARGISNULL(1))
		RaiseInvalid("key must not be null");
	Connect();
	bool removed = schedule::Remove(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1));
	Finish();
	PG_RETURN_BOOL(removed);
}

/* pqrun.cron_next(expr, after) is STRICT. */
PQRUN_FUNCTION_ANY_VERSION(pqrun_cron_next)
{
	cron::Schedule parsed = schedule::ParseCron(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_TIMESTAMPTZ(schedule::CronNext(parsed, PG_GETARG_TIMESTAMPTZ(1), cron_zone::Current()));
}

/* pqrun._run_every_next(run_every, due, after) is STRICT. */
PQRUN_FUNCTION_ANY_VERSION(pqrun_run_every_next)
{
	const Interval *every = PG_GETARG_INTERVAL_P(0);
	schedule::CheckRunEvery(every);
	PG_RETURN_TIMESTAMPTZ(
	    schedule::EveryNext(every, PG_GETARG_TIMESTAMPTZ(1), PG_GETARG_TIMESTAMPTZ(2), cron_zone::Current()));
}

PQRUN_FUNCTION(pqrun_fire_due_schedules)
{
	Connect();
	int64 fired = schedule::FireDue();
	Finish();
	PG_RETURN_INT64(fired);
}
