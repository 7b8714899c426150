/* src/pure/cron.cpp — cron parser and next-fire search (see cron.hpp).
 *
 * Owns the grammar, error messages and the calendar arithmetic behind
 * pqrun.cron_next. Civil dates use Howard Hinnant's days_from_civil /
 * civil_from_days rather than the C library, because the zone comes from
 * PostgreSQL (via TimeZone) and the process TZ must not leak in. The search
 * walks local civil time field by field (month, day, hour, minute) and only
 * then maps the found local minute to UTC, so its cost does not depend on how
 * far away the next fire is.
 */
#ifdef POSTGRES_H
#error "cron.cpp must stay free of PostgreSQL headers"
#endif

#include "pure/cron.hpp"

#include <algorithm>

namespace pqrun::cron {
namespace {

constexpr int64_t kSecondsPerDay = 86400;
constexpr int64_t kMicrosPerSecond = 1000000;
// The Gregorian calendar repeats (weekdays included) every 400 years, so any
// date pattern that Parse accepts occurs within this many years of any start.
constexpr int64_t kHorizonYears = 401;
// Keeps every intermediate value, including the horizon, far from overflow.
constexpr int64_t kMaxAbsAfterMicros = 8'000'000'000'000'000'000;
// With a well-behaved zone the first candidate always wins; this only stops a
// zone that breaks the TimeZone contract from looping (a day of minutes).
constexpr int kMaxAttempts = 1500;
constexpr std::string_view kErrorPrefix = "invalid cron expression: ";
constexpr std::string_view kSpaces = " \t\n\r\f\v";

int64_t
FloorDiv(int64_t a, int64_t b)
{
	const int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// Howard Hinnant's days_from_civil and civil_from_days (proleptic Gregorian,
// day 0 = 1970-01-01), valid far beyond any instant NextFire accepts.
int64_t
DaysFromCivil(int64_t y, int m, int d)
{
	y -= m <= 2;
	const int64_t era = (y >= 0 ? y : y - 399) / 400;
	const int64_t yoe = y - era * 400;
	const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

struct Civil {
	int64_t year;
	int month;
	int day;
};

Civil
CivilFromDays(int64_t z)
{
	z += 719468;
	const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	const int64_t doe = z - era * 146097;
	const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	const int64_t mp = (5 * doy + 2) / 153;
	const int day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
	const int month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
	return {yoe + era * 400 + (month <= 2), month, day};
}

bool
IsLeapYear(int64_t y)
{
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

int
DaysInMonth(int64_t y, int m)
{
	static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && IsLeapYear(y) ? 29 : kDays[m - 1];
}

bool
DayMatches(const Schedule &s, int64_t y, int m, int d)
{
	const int64_t days = DaysFromCivil(y, m, d) + 4; // 1970-01-01 was a Thursday
	const int64_t weekday = days - FloorDiv(days, 7) * 7;
	const bool dom = s.days_of_month[d];
	const bool dow = s.days_of_week[static_cast<size_t>(weekday)];
	return (s.dom_star || s.dow_star) ? (dom && dow) : (dom || dow);
}

// ---- parsing ---------------------------------------------------------------

constexpr const char *kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char *kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

struct FieldSpec {
	const char *name;
	int min;
	int max;
	// Upper end for "*" and "N/step". Day of week stops at 6 so that 7 does
	// not hand Sunday a second step slot; it is also the last named value.
	int open_max;
	const char *const *names; // names[i] is value min + i, or nullptr
};

constexpr FieldSpec kFields[5] = {
    {"minute", 0, 59, 59, nullptr},    {"hour", 0, 23, 23, nullptr},        {"day of month", 1, 31, 31, nullptr},
    {"month", 1, 12, 12, kMonthNames}, {"day of week", 0, 7, 6, kDayNames},
};

bool
IsSpace(char c)
{
	return kSpaces.find(c) != std::string_view::npos;
}

bool
IsDigit(char c)
{
	return c >= '0' && c <= '9';
}

// ASCII only: the locale must not change what a schedule means.
bool
EqualsIgnoreCase(std::string_view a, std::string_view b)
{
	auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
	return a.size() == b.size() &&
	       std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

// Saturates instead of overflowing; anything that large is out of range anyway.
bool
ParseDigits(std::string_view text, int *out)
{
	if (text.empty())
		return false;
	long value = 0;
	for (char c : text) {
		if (!IsDigit(c))
			return false;
		value = std::min(value * 10 + (c - '0'), 1000000L);
	}
	*out = static_cast<int>(value);
	return true;
}

std::string
Quote(std::string_view s)
{
	return "\"" + std::string(s) + "\"";
}

class FieldParser {
  public:
	FieldParser(const FieldSpec &spec, std::string *error) : spec_(spec), error_(error) {}

	bool Parse(std::string_view text, uint64_t *bits)
	{
		for (size_t pos = 0;;) {
			const size_t comma = text.find(',', pos);
			const std::string_view elem = text.substr(pos, comma == std::string_view::npos ? comma : comma - pos);
			if (elem.empty())
				return Bad(text, ": empty list element");
			if (!ParseElement(elem, bits))
				return false;
			if (comma == std::string_view::npos)
				return true;
			pos = comma + 1;
		}
	}

  private:
	bool Bad(std::string_view token, std::string_view why = "")
	{
		*error_ = std::string(kErrorPrefix) + "bad " + spec_.name + " field " + Quote(token) + std::string(why);
		return false;
	}

	bool OutOfRange(const char *what, std::string_view value, int lo, int hi, std::string_view elem)
	{
		*error_ = std::string(kErrorPrefix) + spec_.name + " " + what + " " + std::string(value) + " out of range " +
		          std::to_string(lo) + "-" + std::to_string(hi) + " in " + Quote(elem);
		return false;
	}

	bool ParseValue(std::string_view token, std::string_view elem, int *out)
	{
		if (!token.empty() && IsDigit(token[0])) {
			if (!ParseDigits(token, out))
				return Bad(elem);
			if (*out < spec_.min || *out > spec_.max)
				return OutOfRange("value", token, spec_.min, spec_.max, elem);
			return true;
		}
		for (int i = 0; spec_.names && i <= spec_.open_max - spec_.min; ++i) {
			if (EqualsIgnoreCase(token, spec_.names[i])) {
				*out = spec_.min + i;
				return true;
			}
		}
		return Bad(elem);
	}

	bool ParseElement(std::string_view elem, uint64_t *bits)
	{
		std::string_view range = elem;
		int step = 1;
		const size_t slash = elem.find('/');
		const bool has_step = slash != std::string_view::npos;
		if (has_step) {
			range = elem.substr(0, slash);
			const std::string_view step_text = elem.substr(slash + 1);
			if (step_text.empty())
				return Bad(elem, ": empty step");
			if (!ParseDigits(step_text, &step))
				return Bad(elem);
			if (step < 1 || step > spec_.max)
				return OutOfRange("step", step_text, 1, spec_.max, elem);
		}
		int lo = spec_.min, hi = spec_.open_max;
		if (range != "*") {
			const size_t dash = range.find('-');
			if (!ParseValue(range.substr(0, dash), elem, &lo))
				return false;
			if (dash != std::string_view::npos) {
				if (!ParseValue(range.substr(dash + 1), elem, &hi))
					return false;
				if (lo > hi)
					return Bad(elem, ": reversed range");
			} else {
				// "N/step" (a cronie extension) runs from N to the end of the field.
				hi = has_step ? std::max(lo, spec_.open_max) : lo;
			}
		}
		for (int v = lo; v <= hi; v += step)
			*bits |= uint64_t{1} << v;
		return true;
	}

	const FieldSpec &spec_;
	std::string *error_;
};

template <size_t N>
std::bitset<N>
ToBitset(uint64_t bits)
{
	return std::bitset<N>(static_cast<unsigned long long>(bits));
}

bool
CanEverFire(const Schedule &s)
{
	// With neither field starred the OR rule lets any selected weekday fire,
	// and every month has every weekday. Otherwise both must match, so some
	// selected day of month must exist in a selected month (Feb 29 counts); the
	// 400-year cycle then puts that date on every weekday, so it fires.
	if (!s.dom_star && !s.dow_star)
		return true;
	for (int m = 1; m <= 12; ++m)
		for (int d = 1; s.months[m] && d <= DaysInMonth(2000, m); ++d)
			if (s.days_of_month[d])
				return true;
	return false;
}

// ---- time zones ------------------------------------------------------------

// First instant in (lo, hi] whose offset differs from `before`; the caller has
// seen OffsetAt(hi) != before, and the zone contract allows one change only.
int64_t
FindChange(const TimeZone &tz, int64_t lo, int64_t hi, long before)
{
	while (hi - lo > 1) {
		const int64_t mid = lo + (hi - lo) / 2;
		(tz.OffsetAt(mid) == before ? lo : hi) = mid;
	}
	return hi;
}

// The largest local time the clock has shown at any second up to `after`. A
// local minute fired already iff the clock has reached it, and after a fall
// back that is not the time the clock shows now.
int64_t
LocalHighWater(const TimeZone &tz, int64_t after)
{
	const long now = tz.OffsetAt(after);
	const long day_ago = tz.OffsetAt(after - kSecondsPerDay);
	int64_t high = after + now;
	if (day_ago > now) {
		const int64_t change = FindChange(tz, after - kSecondsPerDay, after, day_ago);
		high = std::max(high, change - 1 + day_ago);
	}
	return high;
}

// The first UTC second at which the local clock reads `local` or later: the
// first occurrence inside a fold, the end of the gap for a skipped time.
int64_t
FirstReach(const TimeZone &tz, int64_t local)
{
	const long before = tz.OffsetAt(local - kSecondsPerDay);
	if (tz.OffsetAt(local + kSecondsPerDay) == before)
		return local - before;
	const int64_t change = FindChange(tz, local - kSecondsPerDay, local + kSecondsPerDay, before);
	if (local - before < change)
		return local - before;
	const long after = tz.OffsetAt(change);
	return change + after >= local ? change : local - after;
}

// ---- search ----------------------------------------------------------------

// Smallest matching local minute (seconds on the local civil time line) at or
// after `from`, which must be minute-aligned. Each step skips at least a whole
// unit of the field that failed, so a year costs at most a few hundred steps.
bool
NextLocalMinute(const Schedule &s, int64_t from, int64_t last_year, int64_t *out)
{
	const int64_t days = FloorDiv(from, kSecondsPerDay);
	const int64_t second_of_day = from - days * kSecondsPerDay;
	const Civil civil = CivilFromDays(days);
	int64_t year = civil.year;
	int month = civil.month, day = civil.day;
	int hour = static_cast<int>(second_of_day / 3600), minute = static_cast<int>(second_of_day % 3600 / 60);
	while (year <= last_year) {
		if (minute > 59) {
			minute = 0;
			++hour;
		}
		if (hour > 23) {
			hour = 0;
			++day;
		}
		if (!s.months[month] || day > DaysInMonth(year, month)) {
			day = 1, hour = 0, minute = 0;
			if (++month > 12)
				month = 1, ++year;
		} else if (!DayMatches(s, year, month, day)) {
			++day, hour = 0, minute = 0;
		} else if (!s.hours[hour]) {
			++hour, minute = 0;
		} else if (!s.minutes[minute]) {
			++minute;
		} else {
			*out = ((DaysFromCivil(year, month, day) * 24 + hour) * 60 + minute) * 60;
			return true;
		}
	}
	return false;
}

struct Macro {
	const char *name;
	const char *expansion;
};

constexpr Macro kMacros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},
};

ParseResult
Failure(std::string message)
{
	ParseResult result;
	result.error = std::string(kErrorPrefix) + std::move(message);
	return result;
}

} // namespace

ParseResult
Parse(std::string_view expr)
{
	std::string_view fields[5];
	size_t count = 0;
	for (size_t i = 0; i < expr.size();) {
		if (IsSpace(expr[i])) {
			++i;
			continue;
		}
		const size_t start = i;
		while (i < expr.size() && !IsSpace(expr[i]))
			++i;
		if (count < 5)
			fields[count] = expr.substr(start, i - start);
		++count;
	}
	if (count > 0 && fields[0][0] == '@') {
		if (count != 1)
			return Failure("macro " + Quote(fields[0]) + " must be the whole expression");
		for (const Macro &macro : kMacros)
			if (EqualsIgnoreCase(fields[0], macro.name))
				return Parse(macro.expansion);
		return Failure("unsupported macro " + Quote(fields[0]));
	}
	if (count != 5)
		return Failure("expected 5 fields, got " + std::to_string(count));

	ParseResult result;
	uint64_t bits[5] = {};
	for (size_t i = 0; i < 5; ++i)
		if (!FieldParser(kFields[i], &result.error).Parse(fields[i], &bits[i]))
			return result;
	if (bits[4] & (uint64_t{1} << 7))
		bits[4] = (bits[4] & 0x7f) | 1; // 7 is Sunday too
	Schedule &s = result.schedule;
	s.minutes = ToBitset<60>(bits[0]);
	s.hours = ToBitset<24>(bits[1]);
	s.days_of_month = ToBitset<32>(bits[2]);
	s.months = ToBitset<13>(bits[3]);
	s.days_of_week = ToBitset<7>(bits[4]);
	s.dom_star = fields[2][0] == '*';
	s.dow_star = fields[4][0] == '*';
	if (!CanEverFire(s)) {
		const size_t first = expr.find_first_not_of(kSpaces);
		const size_t last = expr.find_last_not_of(kSpaces);
		return Failure(Quote(expr.substr(first, last - first + 1)) +
		               " never fires: no selected month has a selected day of month");
	}
	result.ok = true;
	return result;
}

const TimeZone &
Utc() noexcept
{
	static const FixedOffsetZone utc(0);
	return utc;
}

bool
NextFire(const Schedule &schedule, int64_t after_us, const TimeZone &tz, int64_t *next_us) noexcept
{
	if (after_us < -kMaxAbsAfterMicros || after_us > kMaxAbsAfterMicros)
		return false;
	const int64_t after = FloorDiv(after_us, kMicrosPerSecond);
	// Only minutes the clock has not reached yet can still fire.
	int64_t from = FloorDiv(LocalHighWater(tz, after), 60) * 60 + 60;
	const int64_t last_year = CivilFromDays(FloorDiv(from, kSecondsPerDay)).year + kHorizonYears;
	for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
		int64_t local;
		if (!NextLocalMinute(schedule, from, last_year, &local))
			return false;
		const int64_t fire = FirstReach(tz, local);
		if (fire > after) {
			*next_us = fire * kMicrosPerSecond;
			return true;
		}
		from = local + 60;
	}
	return false;
}

} // namespace pqrun::cron
