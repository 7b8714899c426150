/* src/pure/cron.hpp — cron schedule parsing and next-fire computation.
 *
 * This module owns what a pqrun schedule string means: the five-field Vixie
 * cron syntax plus @-macros, the Vixie day-of-month/day-of-week rule, and how
 * matching local civil minutes map onto UTC instants when the zone's offset
 * changes. It is plain C++17 with no PostgreSQL dependency so it can be unit
 * tested standalone; the extension supplies zones through TimeZone and converts
 * its timestamps to and from Unix microseconds at the boundary. It backs the
 * SQL function pqrun.cron_next and schedule validation.
 */
#ifndef PQRUN_CRON_HPP
#define PQRUN_CRON_HPP

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>

namespace pqrun::cron {

/*
 * A parsed expression. Bits are indexed by the field's own value, so bit 0 of
 * days_of_month and months is always clear; day of week 7 is folded into 0.
 * The *_star flags follow Vixie: a field is "star" iff its text begins with
 * '*', stepped stars included. When either flag is set a day must match both
 * day fields (a bare '*' matches everything, so only the other one
 * restricts); when neither is set a day matching either field qualifies.
 */
struct Schedule {
	std::bitset<60> minutes;
	std::bitset<24> hours;
	std::bitset<32> days_of_month;
	std::bitset<13> months;
	std::bitset<7> days_of_week; // 0 = Sunday
	bool dom_star = false;
	bool dow_star = false;
};

struct ParseResult {
	bool ok = false;
	Schedule schedule;
	std::string error; // set iff !ok; starts with "invalid cron expression: "
};

/*
 * Parses "m h dom mon dow" or one of @yearly @annually @monthly @weekly
 * @daily @midnight @hourly (case-insensitive; @reboot is rejected). Never
 * throws for malformed input (only std::bad_alloc can escape). Expressions
 * that can never fire (e.g. "0 0 31 2 *") are rejected here, so a schedule
 * that parsed always has a next fire.
 */
ParseResult Parse(std::string_view expr);

/*
 * The zone a schedule is evaluated in. Implementations must be cheap, pure and
 * must not throw; NextFire calls OffsetAt a few dozen times at most.
 * Assumed, as holds for every real zone: |offset| < 24h, and at most one
 * offset change within any 48-hour window.
 */
struct TimeZone {
	virtual ~TimeZone() = default;
	// UTC offset in seconds (local = utc + offset) in effect at utc_seconds.
	virtual long OffsetAt(int64_t utc_seconds) const noexcept = 0;
};

class FixedOffsetZone final : public TimeZone {
  public:
	explicit FixedOffsetZone(long offset_seconds) noexcept : offset_seconds_(offset_seconds) {}
	long OffsetAt(int64_t) const noexcept override { return offset_seconds_; }

  private:
	long offset_seconds_;
};

// A shared FixedOffsetZone(0).
const TimeZone &Utc() noexcept;

/*
 * Stores in *next_us the first fire instant strictly after after_us (both
 * Unix microseconds, UTC) and returns true. Fires happen at second 0 of each
 * matching minute of local civil time in tz, with these rules at offset
 * changes, which guarantee that no local slot fires twice or is lost:
 *   - each matching local minute fires once, at the first UTC instant at which
 *     the local clock reaches it;
 *   - so in a gap (spring forward) every slot inside it fires at the instant
 *     the gap ends, and all of them together (plus a slot at the gap's end
 *     time itself) make one single fire;
 *   - in a fold (fall back) slots fire during the first pass only; the
 *     repeated local times are silent the second time.
 * Returns false only if after_us lies outside +-8e18 (about +-250,000 years)
 * or tz breaks the assumptions above; a schedule Parse accepted always fires
 * within one 400-year Gregorian cycle, which bounds the search.
 */
bool NextFire(const Schedule &schedule, int64_t after_us, const TimeZone &tz, int64_t *next_us) noexcept;

} // namespace pqrun::cron

#endif // PQRUN_CRON_HPP
