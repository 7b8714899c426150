/* src/jobs/cron_zone.hpp — cron schedules evaluated in PostgreSQL's time zones.
 *
 * The pure cron module (cron.hpp) knows nothing about PostgreSQL: it works on
 * Unix microseconds and asks a cron::TimeZone for UTC offsets. This adapter
 * supplies that zone from PostgreSQL's own tz library (pg_tzset/pg_localtime,
 * the same zone data the server uses for timestamptz), and converts between
 * TimestampTz (microseconds since 2000-01-01) and Unix microseconds. It also
 * owns the lookup of the pqrun.cron_timezone setting.
 */
#pragma once

#include "pg/pg.hpp"

#include "pure/cron.hpp"

namespace pqrun::cron_zone {

/* Lookup answers the zone called `name` (an IANA name such as
 * "Europe/Berlin", matched case-insensitively, or a POSIX TZ string), or
 * raises 22023 naming `setting` in the message. Zones are cached by
 * PostgreSQL for the backend's lifetime; the pointer is never freed. */
pg_tz *Lookup(const char *name, const char *setting);

/* Current answers the zone of the pqrun.cron_timezone setting, raising 22023
 * if it does not name a zone. */
pg_tz *Current();

/* NextFire stores in *next the first fire of `schedule` strictly after
 * `after`, evaluated in `tz`, and returns true; false when there is none
 * inside the timestamptz range (or `after` is infinite). It calls no
 * PostgreSQL function that can raise an error and allocates nothing. */
bool NextFire(const cron::Schedule &schedule, TimestampTz after, const pg_tz *tz, TimestampTz *next) noexcept;

} // namespace pqrun::cron_zone
