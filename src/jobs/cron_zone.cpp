/* src/jobs/cron_zone.cpp — cron schedules evaluated in PostgreSQL's time zones.
 *
 * Owns PgZone, the cron::TimeZone backed by PostgreSQL's tz library, the
 * TimestampTz <-> Unix microsecond conversion at the cron boundary, and the
 * lookup of pqrun.cron_timezone. pg_localtime is pure computation over the
 * zone data already loaded by pg_tzset (no allocation, no ereport), so the
 * cron search can call it from noexcept code.
 */
#include "jobs/cron_zone.hpp"

#include "guc.hpp"

namespace pqrun::cron_zone {

namespace {

/* TimestampTz counts from 2000-01-01, Unix time from 1970-01-01. */
constexpr int64 kUnixEpochOffsetUs = static_cast<int64>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;

/* PgZone answers UTC offsets from a zone loaded by pg_tzset. It owns
 * nothing and lives only inside NextFire's frame. */
class PgZone final : public cron::TimeZone {
  public:
	explicit PgZone(const pg_tz *tz) noexcept : tz_(tz) {}

	long OffsetAt(int64_t utc_seconds) const noexcept override
	{
		pg_time_t t = utc_seconds;
		const struct pg_tm *tm = pg_localtime(&t, tz_);
		/* NULL only for years beyond the int range, far past anything
		 * cron::NextFire asks about. */
		return tm ? tm->tm_gmtoff : 0;
	}

  private:
	const pg_tz *tz_;
};

} // namespace

pg_tz *
Lookup(const char *name, const char *setting)
{
	pg_tz *tz = (name != nullptr && name[0] != '\0') ? pg_tzset(name) : nullptr;
	if (tz == nullptr)
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("time zone \"%s\" not recognized", name ? name : ""),
		         errhint("Set %s to a time zone name such as \"UTC\" or \"Europe/Berlin\".", setting)));
	if (!pg_tz_acceptable(tz))
		ereport(ERROR,
		        (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("time zone \"%s\" appears to use leap seconds", name),
		         errdetail("PostgreSQL does not support leap seconds."),
		         errhint("Set %s to a time zone name such as \"UTC\" or \"Europe/Berlin\".", setting)));
	return tz;
}

pg_tz *
Current()
{
	return Lookup(pqrun_cron_timezone ? pqrun_cron_timezone : "UTC", "pqrun.cron_timezone");
}

bool
NextFire(const cron::Schedule &schedule, TimestampTz after, const pg_tz *tz, TimestampTz *next) noexcept
{
	int64 after_us;
	if (TIMESTAMP_NOT_FINITE(after) || pg_add_s64_overflow(after, kUnixEpochOffsetUs, &after_us))
		return false;
	PgZone zone(tz);
	int64_t next_us;
	if (!cron::NextFire(schedule, after_us, zone, &next_us))
		return false;
	TimestampTz result;
	if (pg_sub_s64_overflow(next_us, kUnixEpochOffsetUs, &result) || !IS_VALID_TIMESTAMP(result))
		return false;
	*next = result;
	return true;
}

} // namespace pqrun::cron_zone
