/* test/unit/cron_test.cpp — standalone tests for src/cron.{hpp,cpp}.
 *
 * Owns the executable specification of pqrun's cron contract: syntax accepted
 * and rejected (with the exact error wording), next-fire tables in UTC, and
 * the DST rules checked against fake zones modelled on America/New_York and
 * Europe/Berlin in 2026 plus a few odd offsets. Expected instants are written
 * out literally and converted by a deliberately naive calendar below, so the
 * module's own date arithmetic is never used to check itself. Prints one
 * summary line and exits non-zero on any failure.
 */
#include "pure/cron.hpp"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

using pqrun::cron::FixedOffsetZone;
using pqrun::cron::NextFire;
using pqrun::cron::Parse;
using pqrun::cron::ParseResult;
using pqrun::cron::Schedule;
using pqrun::cron::TimeZone;
using pqrun::cron::Utc;

namespace {

int g_passed = 0;
int g_failed = 0;

void Check(bool ok, const char *what, int line) {
	if (ok) {
		++g_passed;
		return;
	}
	++g_failed;
	std::cerr << "cron_test.cpp:" << line << ": CHECK failed: " << what << "\n";
}

template <typename A, typename B>
void CheckEq(const A &actual, const B &expected, const char *what, int line) {
	if (actual == expected) {
		++g_passed;
		return;
	}
	++g_failed;
	std::cerr << "cron_test.cpp:" << line << ": CHECK_EQ failed: " << what << "\n  actual:   " << actual
			  << "\n  expected: " << expected << "\n";
}

#define CHECK(cond) Check((cond), #cond, __LINE__)
#define CHECK_EQ(actual, expected) CheckEq((actual), (expected), #actual, __LINE__)

// ---- naive UTC calendar (independent of the module) ------------------------

constexpr int64_t kMicros = 1000000;

bool Leap(int y) {
	return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

int MonthLength(int y, int m) {
	static const int kLen[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && Leap(y) ? 29 : kLen[m - 1];
}

int YearLength(int y) {
	return Leap(y) ? 366 : 365;
}

// "YYYY-MM-DD HH:MM[:SS]" in UTC to Unix seconds, by counting days one by one.
int64_t Secs(const char *text) {
	int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
	if (std::sscanf(text, "%d-%d-%d %d:%d:%d", &y, &mo, &d, &h, &mi, &s) < 5) {
		std::cerr << "bad test timestamp " << text << "\n";
		std::exit(2);
	}
	int64_t days = 0;
	for (int yy = 1970; yy < y; ++yy)
		days += YearLength(yy);
	for (int yy = y; yy < 1970; ++yy)
		days -= YearLength(yy);
	for (int mm = 1; mm < mo; ++mm)
		days += MonthLength(y, mm);
	days += d - 1;
	return ((days * 24 + h) * 60 + mi) * 60 + s;
}

int64_t Us(const char *text) {
	return Secs(text) * kMicros;
}

// Unix microseconds to "YYYY-MM-DD HH:MM", with ":SS" / ".ffffff" only when non-zero.
std::string Show(int64_t us) {
	int64_t secs = us / kMicros, frac = us % kMicros;
	if (frac < 0)
		frac += kMicros, --secs;
	int64_t days = secs / 86400, sod = secs % 86400;
	if (sod < 0)
		sod += 86400, --days;
	int y = 1970, m = 1;
	while (days < 0)
		days += YearLength(--y);
	while (days >= YearLength(y))
		days -= YearLength(y++);
	while (days >= MonthLength(y, m))
		days -= MonthLength(y, m++);
	char buf[64];
	int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d", y, m, static_cast<int>(days) + 1,
						  static_cast<int>(sod / 3600), static_cast<int>(sod % 3600 / 60));
	if (sod % 60 != 0 || frac != 0)
		n += std::snprintf(buf + n, sizeof buf - n, ":%02d", static_cast<int>(sod % 60));
	if (frac != 0)
		std::snprintf(buf + n, sizeof buf - n, ".%06" PRId64, frac);
	return buf;
}

// ---- zones -----------------------------------------------------------------

// A zone given as an initial offset plus (instant, new offset) changes.
class TableZone final : public TimeZone {
public:
	TableZone(long initial, std::vector<std::pair<int64_t, long>> changes)
		: initial_(initial), changes_(std::move(changes)) {}
	long OffsetAt(int64_t utc_seconds) const noexcept override {
		long offset = initial_;
		for (const auto &change : changes_)
			if (utc_seconds >= change.first)
				offset = change.second;
		return offset;
	}

private:
	long initial_;
	std::vector<std::pair<int64_t, long>> changes_;
};

// America/New_York 2026: EST -5, EDT -4 from 03-08 07:00Z until 11-01 06:00Z.
const TableZone kNewYork(-5 * 3600, {{Secs("2026-03-08 07:00"), -4 * 3600}, {Secs("2026-11-01 06:00"), -5 * 3600}});
// Europe/Berlin 2026: CET +1, CEST +2 from 03-29 01:00Z until 10-25 01:00Z.
const TableZone kBerlin(3600, {{Secs("2026-03-29 01:00"), 7200}, {Secs("2026-10-25 01:00"), 3600}});
// Lord Howe style half-hour DST: +10:30 to +11 at 02:00 local on 2026-10-04.
const TableZone kLordHowe(37800, {{Secs("2026-10-03 15:30"), 39600}});
// Samoa 2011: -10 to +14, skipping all of local 2011-12-30.
const TableZone kSamoa(-10 * 3600, {{Secs("2011-12-30 10:00"), 14 * 3600}});
// The mirror image: +14 to -10, so all of local 2030-01-01 happens twice.
const TableZone kReverseSamoa(14 * 3600, {{Secs("2030-01-01 10:00"), -10 * 3600}});

// Counts lookups, to pin down how much work one NextFire does.
class CountingZone final : public TimeZone {
public:
	explicit CountingZone(const TimeZone &inner) : inner_(inner) {}
	long OffsetAt(int64_t utc_seconds) const noexcept override {
		++calls;
		return inner_.OffsetAt(utc_seconds);
	}
	mutable int calls = 0;

private:
	const TimeZone &inner_;
};

const FixedOffsetZone kIndia(5 * 3600 + 30 * 60);
const FixedOffsetZone kPacific(-8 * 3600);
const FixedOffsetZone kNewfoundland(-(3 * 3600 + 30 * 60));
const FixedOffsetZone kKiribati(14 * 3600);
const FixedOffsetZone kLmt(-(4 * 3600 + 56 * 60 + 2));	// New York local mean time

// ---- helpers ---------------------------------------------------------------

std::string Join(const std::vector<std::string> &parts, const char *sep = ", ") {
	std::string out;
	for (const auto &p : parts)
		out += (out.empty() ? "" : sep) + p;
	return out;
}

template <size_t N>
std::string Values(const std::bitset<N> &bits) {
	std::vector<std::string> parts;
	for (size_t i = 0; i < N;) {
		if (!bits[i]) {
			++i;
			continue;
		}
		size_t j = i;
		while (j + 1 < N && bits[j + 1])
			++j;
		if (j - i >= 2)
			parts.push_back(std::to_string(i) + "-" + std::to_string(j));
		else
			for (size_t k = i; k <= j; ++k)
				parts.push_back(std::to_string(k));
		i = j + 1;
	}
	return Join(parts, ",");
}

// The parsed bit sets as "min hour dom mon dow [dom*] [dow*]", or the error.
std::string Describe(const char *expr) {
	const ParseResult r = Parse(expr);
	if (!r.ok)
		return r.error.empty() ? "FAILED WITHOUT MESSAGE" : r.error;
	if (!r.error.empty())
		return "OK WITH MESSAGE " + r.error;
	const Schedule &s = r.schedule;
	std::string out = Values(s.minutes) + " " + Values(s.hours) + " " + Values(s.days_of_month) + " " +
					  Values(s.months) + " " + Values(s.days_of_week);
	if (s.dom_star)
		out += " dom*";
	if (s.dow_star)
		out += " dow*";
	return out;
}

std::string Error(const char *expr) {
	const ParseResult r = Parse(expr);
	return r.ok ? "accepted" : r.error;
}

std::vector<std::string> SeriesVec(const char *expr, int64_t after_us, int n, const TimeZone &tz) {
	const ParseResult r = Parse(expr);
	if (!r.ok)
		return {r.error};
	std::vector<std::string> out;
	for (int i = 0; i < n; ++i) {
		int64_t next = 0;
		if (!NextFire(r.schedule, after_us, tz, &next))
			return out.push_back("none"), out;
		if (next <= after_us)
			return out.push_back("NOT AFTER " + Show(next)), out;
		out.push_back(Show(next));
		after_us = next;
	}
	return out;
}

std::string Series(const char *expr, const char *after, int n, const TimeZone &tz = Utc()) {
	return Join(SeriesVec(expr, Us(after), n, tz));
}

std::string Next(const char *expr, const char *after, const TimeZone &tz = Utc()) {
	return Series(expr, after, 1, tz);
}

std::string NextUs(const char *expr, int64_t after_us, const TimeZone &tz = Utc()) {
	return Join(SeriesVec(expr, after_us, 1, tz));
}

// Fires in (from, to]; checks that UTC instants and local labels both only go up.
std::vector<int64_t> Walk(const char *expr, const char *from, const char *to, const TimeZone &tz, int line) {
	const ParseResult r = Parse(expr);
	std::vector<int64_t> fires;
	int64_t after = Us(from), prev_local = INT64_MIN;
	bool monotonic = true;
	while (r.ok) {
		int64_t next = 0;
		if (!NextFire(r.schedule, after, tz, &next) || next > Us(to))
			break;
		const int64_t local = next / kMicros + tz.OffsetAt(next / kMicros);
		monotonic = monotonic && next > after && local > prev_local;
		fires.push_back(next);
		prev_local = local;
		after = next;
	}
	Check(r.ok && monotonic, "walk is strictly increasing in UTC and in local time", line);
	return fires;
}

bool Contains(const std::string &haystack, const std::string &needle) {
	return haystack.find(needle) != std::string::npos;
}

// ---- tests -----------------------------------------------------------------

void TestCalendarHelpers() {
	// The naive calendar against `date -u -d ... +%s`.
	CHECK_EQ(Secs("1970-01-01 00:00"), 0);
	CHECK_EQ(Secs("2026-03-08 07:00"), 1772953200);
	CHECK_EQ(Secs("2026-11-01 06:00"), 1793512800);
	CHECK_EQ(Secs("2026-03-29 01:00"), 1774746000);
	CHECK_EQ(Secs("2026-10-25 01:00"), 1792890000);
	CHECK_EQ(Secs("1900-01-01 00:00"), -2208988800LL);
	CHECK_EQ(Secs("2104-02-29 00:00"), 4233686400LL);
	CHECK_EQ(Secs("2000-02-29 12:34"), 951827640);
	CHECK_EQ(Show(Us("2104-02-29 00:00")), "2104-02-29 00:00");
	CHECK_EQ(Show(Us("1900-01-01 00:00") - 1), "1899-12-31 23:59:59.999999");
	CHECK_EQ(Show(Us("2026-01-01 04:56:02")), "2026-01-01 04:56:02");
}

void TestParseAccepts() {
	CHECK_EQ(Describe("* * * * *"), "0-59 0-23 1-31 1-12 0-6 dom* dow*");
	CHECK_EQ(Describe("1,5,10 * * * *"), "1,5,10 0-23 1-31 1-12 0-6 dom* dow*");
	CHECK_EQ(Describe("1-5 2-4 10-12 6-8 1-5"), "1-5 2-4 10-12 6-8 1-5");
	CHECK_EQ(Describe("*/15 */6 */10 */3 */2"), "0,15,30,45 0,6,12,18 1,11,21,31 1,4,7,10 0,2,4,6 dom* dow*");
	CHECK_EQ(Describe("1-30/5 0-23/12 1-31/15 1-12/6 0-6/3"), "1,6,11,16,21,26 0,12 1,16,31 1,7 0,3,6");
	CHECK_EQ(Describe("5/10 5/6 5/10 5/3 5/1"), "5,15,25,35,45,55 5,11,17,23 5,15,25 5,8,11 5,6");
	CHECK_EQ(Describe("0,30 9-17/4,20 1,15 * *"), "0,30 9,13,17,20 1,15 1-12 0-6 dow*");
	CHECK_EQ(Describe("*/1 0 1 1 *"), "0-59 0 1 1 0-6 dow*");
	CHECK_EQ(Describe("*/59 */23 */31 */12 */7"), "0,59 0,23 1 1 0 dom* dow*");
	CHECK_EQ(Describe("05 007 01 01 00"), "5 7 1 1 0");
	// Names: three letters, any case, usable in lists and ranges.
	CHECK_EQ(Describe("0 0 * JAN-MAR MON-FRI"), "0 0 1-31 1-3 1-5 dom*");
	CHECK_EQ(Describe("0 0 * jan,Jun,DEC sun,sAt"), "0 0 1-31 1,6,12 0,6 dom*");
	CHECK_EQ(Describe("0 0 * feb-Nov/3 tue-THU/2"), "0 0 1-31 2,5,8,11 2,4 dom*");
	CHECK_EQ(Describe("0 0 * jan-5 1-fri"), "0 0 1-31 1-5 1-5 dom*");
	// Sunday is 0 and 7.
	CHECK_EQ(Describe("0 0 * * 7"), "0 0 1-31 1-12 0 dom*");
	CHECK_EQ(Describe("0 0 * * 0,7,SUN"), "0 0 1-31 1-12 0 dom*");
	CHECK_EQ(Describe("0 0 * * 5-7"), "0 0 1-31 1-12 0,5,6 dom*");
	CHECK_EQ(Describe("0 0 * * 1-7/2"), "0 0 1-31 1-12 0,1,3,5 dom*");
	CHECK_EQ(Describe("0 0 * * 6/1"), "0 0 1-31 1-12 6 dom*");
	CHECK_EQ(Describe("0 0 * * 7/1"), "0 0 1-31 1-12 0 dom*");
	// Star flags follow the first character of the field only.
	CHECK_EQ(Describe("0 0 */2 * 1"), "0 0 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 1-12 1 dom*");
	CHECK_EQ(Describe("0 0 *,5 * 0-6/1"), "0 0 1-31 1-12 0-6 dom*");
	CHECK_EQ(Describe("0 0 1-31 * 0-6"), "0 0 1-31 1-12 0-6");
	// Whitespace.
	CHECK_EQ(Describe(" \t 0  12\t*\t* *\t "), "0 12 1-31 1-12 0-6 dom* dow*");
	CHECK_EQ(Describe("0\n12 * * *\n"), "0 12 1-31 1-12 0-6 dom* dow*");
	// Macros.
	CHECK_EQ(Describe("@yearly"), "0 0 1 1 0-6 dow*");
	CHECK_EQ(Describe("@ANNUALLY"), "0 0 1 1 0-6 dow*");
	CHECK_EQ(Describe("@Monthly"), "0 0 1 1-12 0-6 dow*");
	CHECK_EQ(Describe("@weekly"), "0 0 1-31 1-12 0 dom*");
	CHECK_EQ(Describe("@daily"), "0 0 1-31 1-12 0-6 dom* dow*");
	CHECK_EQ(Describe("  @midnight\t"), "0 0 1-31 1-12 0-6 dom* dow*");
	CHECK_EQ(Describe("@hourly"), "0 0-23 1-31 1-12 0-6 dom* dow*");
	// Days that exist only sometimes, or only via the weekday OR rule.
	CHECK_EQ(Describe("0 0 29 2 *"), "0 0 29 2 0-6 dow*");
	CHECK_EQ(Describe("0 0 31 2 MON"), "0 0 31 2 1");
	CHECK_EQ(Describe("0 0 31 2,3 *"), "0 0 31 2,3 0-6 dow*");
	CHECK_EQ(Describe("0 0 30,31 2,4 *"), "0 0 30,31 2,4 0-6 dow*");
}

void TestParseRejects() {
	const std::string p = "invalid cron expression: ";
	// Field count.
	CHECK_EQ(Error(""), p + "expected 5 fields, got 0");
	CHECK_EQ(Error(" \t "), p + "expected 5 fields, got 0");
	CHECK_EQ(Error("* * * *"), p + "expected 5 fields, got 4");
	CHECK_EQ(Error("* * * * * *"), p + "expected 5 fields, got 6");
	CHECK_EQ(Error("0 0 * * * /bin/true --now"), p + "expected 5 fields, got 7");
	// Macros.
	CHECK_EQ(Error("@reboot"), p + "unsupported macro \"@reboot\"");
	CHECK_EQ(Error("@REBOOT"), p + "unsupported macro \"@REBOOT\"");
	CHECK_EQ(Error("@fortnightly"), p + "unsupported macro \"@fortnightly\"");
	CHECK_EQ(Error("@"), p + "unsupported macro \"@\"");
	CHECK_EQ(Error("@daily *"), p + "macro \"@daily\" must be the whole expression");
	// Values out of range, one per field and bound.
	CHECK_EQ(Error("60 * * * *"), p + "minute value 60 out of range 0-59 in \"60\"");
	CHECK_EQ(Error("* 24 * * *"), p + "hour value 24 out of range 0-23 in \"24\"");
	CHECK_EQ(Error("* * 0 * *"), p + "day of month value 0 out of range 1-31 in \"0\"");
	CHECK_EQ(Error("* * 32 * *"), p + "day of month value 32 out of range 1-31 in \"32\"");
	CHECK_EQ(Error("* * * 0 *"), p + "month value 0 out of range 1-12 in \"0\"");
	CHECK_EQ(Error("* * * 13 *"), p + "month value 13 out of range 1-12 in \"13\"");
	CHECK_EQ(Error("* * * * 8"), p + "day of week value 8 out of range 0-7 in \"8\"");
	CHECK_EQ(Error("* * * * 1-8"), p + "day of week value 8 out of range 0-7 in \"1-8\"");
	CHECK_EQ(Error("1,2,99 * * * *"), p + "minute value 99 out of range 0-59 in \"99\"");
	CHECK_EQ(Error("99999999999999999999 * * * *"),
			 p + "minute value 99999999999999999999 out of range 0-59 in \"99999999999999999999\"");
	// Steps.
	CHECK_EQ(Error("*/ * * * *"), p + "bad minute field \"*/\": empty step");
	CHECK_EQ(Error("* 1-5/ * * *"), p + "bad hour field \"1-5/\": empty step");
	CHECK_EQ(Error("*/0 * * * *"), p + "minute step 0 out of range 1-59 in \"*/0\"");
	CHECK_EQ(Error("* * * * 1-5/0"), p + "day of week step 0 out of range 1-7 in \"1-5/0\"");
	CHECK_EQ(Error("*/60 * * * *"), p + "minute step 60 out of range 1-59 in \"*/60\"");
	CHECK_EQ(Error("* * * */13 *"), p + "month step 13 out of range 1-12 in \"*/13\"");
	CHECK_EQ(Error("*/x * * * *"), p + "bad minute field \"*/x\"");
	CHECK_EQ(Error("1/2/3 * * * *"), p + "bad minute field \"1/2/3\"");
	CHECK_EQ(Error("*/-1 * * * *"), p + "bad minute field \"*/-1\"");
	// Ranges.
	CHECK_EQ(Error("* 5-1 * * *"), p + "bad hour field \"5-1\": reversed range");
	CHECK_EQ(Error("* * * DEC-JAN *"), p + "bad month field \"DEC-JAN\": reversed range");
	CHECK_EQ(Error("* * * * FRI-MON"), p + "bad day of week field \"FRI-MON\": reversed range");
	CHECK_EQ(Error("* * 20-10/2 * *"), p + "bad day of month field \"20-10/2\": reversed range");
	CHECK_EQ(Error("1-2-3 * * * *"), p + "bad minute field \"1-2-3\"");
	CHECK_EQ(Error("-5 * * * *"), p + "bad minute field \"-5\"");
	CHECK_EQ(Error("5- * * * *"), p + "bad minute field \"5-\"");
	CHECK_EQ(Error("*-5 * * * *"), p + "bad minute field \"*-5\"");
	// Lists.
	CHECK_EQ(Error("1,,2 * * * *"), p + "bad minute field \"1,,2\": empty list element");
	CHECK_EQ(Error("1, * * * *"), p + "bad minute field \"1,\": empty list element");
	CHECK_EQ(Error("* ,1 * * *"), p + "bad hour field \",1\": empty list element");
	CHECK_EQ(Error("* * , * *"), p + "bad day of month field \",\": empty list element");
	// Junk and names.
	CHECK_EQ(Error("* * * * MOX"), p + "bad day of week field \"MOX\"");
	CHECK_EQ(Error("* * * * MON,MOX"), p + "bad day of week field \"MOX\"");
	CHECK_EQ(Error("* * * * MONDAY"), p + "bad day of week field \"MONDAY\"");
	CHECK_EQ(Error("* * * * JAN"), p + "bad day of week field \"JAN\"");
	CHECK_EQ(Error("* * * JANUARY *"), p + "bad month field \"JANUARY\"");
	CHECK_EQ(Error("* * * MON *"), p + "bad month field \"MON\"");
	CHECK_EQ(Error("jan * * * *"), p + "bad minute field \"jan\"");
	CHECK_EQ(Error("* * L * *"), p + "bad day of month field \"L\"");
	CHECK_EQ(Error("5x * * * *"), p + "bad minute field \"5x\"");
	CHECK_EQ(Error("** * * * *"), p + "bad minute field \"**\"");
	CHECK_EQ(Error("*5 * * * *"), p + "bad minute field \"*5\"");
	CHECK_EQ(Error("1.5 * * * *"), p + "bad minute field \"1.5\"");
	CHECK_EQ(Error("+1 * * * *"), p + "bad minute field \"+1\"");
	CHECK_EQ(Error("? * * * *"), p + "bad minute field \"?\"");
	CHECK_EQ(Error("\xc3\xa9 * * * *"), p + "bad minute field \"\xc3\xa9\"");
	CHECK_EQ(Error("* * * * 1#2"), p + "bad day of week field \"1#2\"");
	// Never fires: decided in Parse, exactly (see CanEverFire).
	CHECK_EQ(Error("0 0 31 2 *"), p + "\"0 0 31 2 *\" never fires: no selected month has a selected day of month");
	CHECK_EQ(Error("  0 0 30 2 *\t"), p + "\"0 0 30 2 *\" never fires: no selected month has a selected day of month");
	CHECK(Contains(Error("0 0 31 4,6,9,11 *"), "never fires"));
	CHECK(Contains(Error("0 0 30-31 2 */2"), "never fires"));	// a stepped star still ANDs
	CHECK(Contains(Error("* * 31 FEB,apr *"), "never fires"));
	// Every error names its field exactly once in the canonical spelling.
	const char *const kFieldErrors[][2] = {{"x * * * *", "minute"}, {"* x * * *", "hour"},
										   {"* * x * *", "day of month"}, {"* * * x *", "month"},
										   {"* * * * x", "day of week"}};
	for (const auto &fe : kFieldErrors) {
		const std::string e = Error(fe[0]);
		CHECK_EQ(e, p + "bad " + fe[1] + " field \"x\"");
	}
}

void TestNextUtc() {
	// Strictly after, at any sub-minute position.
	CHECK_EQ(Next("* * * * *", "2026-01-01 00:00"), "2026-01-01 00:01");
	CHECK_EQ(Next("* * * * *", "2026-01-01 00:00:30"), "2026-01-01 00:01");
	CHECK_EQ(NextUs("* * * * *", Us("2026-01-01 00:00:59") + 999999), "2026-01-01 00:01");
	CHECK_EQ(NextUs("* * * * *", Us("2026-01-01 00:00") - 1), "2026-01-01 00:00");
	CHECK_EQ(Next("30 9 * * *", "2026-05-05 09:30"), "2026-05-06 09:30");
	CHECK_EQ(NextUs("30 9 * * *", Us("2026-05-05 09:30") - 1), "2026-05-05 09:30");
	CHECK_EQ(NextUs("30 9 * * *", Us("2026-05-05 09:30") + 1), "2026-05-06 09:30");
	CHECK_EQ(Series("*/15 * * * *", "2026-01-01 23:40", 3), "2026-01-01 23:45, 2026-01-02 00:00, 2026-01-02 00:15");
	CHECK_EQ(Series("*/15 * * * *", "2026-01-01 10:07", 2), "2026-01-01 10:15, 2026-01-01 10:30");
	CHECK_EQ(Series("5/10 * * * *", "2026-01-01 00:00", 3), "2026-01-01 00:05, 2026-01-01 00:15, 2026-01-01 00:25");
	CHECK_EQ(Series("1-30/5 9 * * *", "2026-01-01 09:26", 2), "2026-01-02 09:01, 2026-01-02 09:06");
	CHECK_EQ(Series("15 14,2 * * *", "2026-01-01 12:00", 3), "2026-01-01 14:15, 2026-01-02 02:15, 2026-01-02 14:15");
	// Month ends and leap years.
	CHECK_EQ(Series("0 0 31 * *", "2026-01-01 00:00", 8),
			 "2026-01-31 00:00, 2026-03-31 00:00, 2026-05-31 00:00, 2026-07-31 00:00, "
			 "2026-08-31 00:00, 2026-10-31 00:00, 2026-12-31 00:00, 2027-01-31 00:00");
	CHECK_EQ(Series("0 12 30 * *", "2027-01-30 12:00", 2), "2027-03-30 12:00, 2027-04-30 12:00");
	CHECK_EQ(Next("0 0 29 2 *", "2025-01-01 00:00"), "2028-02-29 00:00");
	CHECK_EQ(Next("0 0 29 2 *", "2028-02-29 00:00"), "2032-02-29 00:00");
	CHECK_EQ(Next("0 0 29 2 *", "2096-03-01 00:00"), "2104-02-29 00:00");	// 2100 is not leap
	CHECK_EQ(Next("0 0 29 2 *", "1999-01-01 00:00"), "2000-02-29 00:00");	// 2000 is
	CHECK_EQ(Series("0 0 L,28 2 *", "2026-01-01 00:00", 1), "invalid cron expression: bad day of month field \"L\"");
	// Vixie AND when one day field is a stepped star: Feb 29 on a Sunday, 40 years apart.
	CHECK_EQ(Series("0 0 29 2 */7", "2089-01-01 00:00", 2), "2128-02-29 00:00, 2156-02-29 00:00");
	// Macros.
	CHECK_EQ(Next("@yearly", "2026-06-15 12:00"), "2027-01-01 00:00");
	CHECK_EQ(Next("@annually", "2026-12-31 23:59:59"), "2027-01-01 00:00");
	CHECK_EQ(Next("@monthly", "2026-01-31 12:00"), "2026-02-01 00:00");
	CHECK_EQ(Next("@weekly", "2026-01-01 00:00"), "2026-01-04 00:00");
	CHECK_EQ(Next("@daily", "2026-02-28 23:59:59"), "2026-03-01 00:00");
	CHECK_EQ(Next("@midnight", "2028-02-28 00:00"), "2028-02-29 00:00");
	CHECK_EQ(Next("@hourly", "2026-01-01 10:00"), "2026-01-01 11:00");
	// Weekdays (2026-01-01 is a Thursday).
	CHECK_EQ(Next("0 9 * * MON", "2026-01-01 00:00"), "2026-01-05 09:00");
	CHECK_EQ(Series("0 9 * * mon,Wed", "2026-01-01 00:00", 3), "2026-01-05 09:00, 2026-01-07 09:00, 2026-01-12 09:00");
	CHECK_EQ(Next("0 0 * * 0", "2026-01-01 00:00"), "2026-01-04 00:00");
	CHECK_EQ(Next("0 0 * * 7", "2026-01-01 00:00"), "2026-01-04 00:00");
	CHECK_EQ(Next("0 0 * * SUN", "2026-01-01 00:00"), "2026-01-04 00:00");
	CHECK_EQ(Series("0 0 * * 1-5", "2026-01-02 00:00", 3), "2026-01-05 00:00, 2026-01-06 00:00, 2026-01-07 00:00");
	CHECK_EQ(Series("0 0 * * MON-FRI", "2026-01-09 12:00", 2), "2026-01-12 00:00, 2026-01-13 00:00");
	CHECK_EQ(Series("0 0 * * 6,7", "2026-01-01 00:00", 3), "2026-01-03 00:00, 2026-01-04 00:00, 2026-01-10 00:00");
	// Vixie OR: every 13th and every Friday (2026-02-13 is both, fired once).
	CHECK_EQ(Series("0 0 13 * FRI", "2026-01-01 00:00", 9),
			 "2026-01-02 00:00, 2026-01-09 00:00, 2026-01-13 00:00, 2026-01-16 00:00, 2026-01-23 00:00, "
			 "2026-01-30 00:00, 2026-02-06 00:00, 2026-02-13 00:00, 2026-02-20 00:00");
	// Vixie AND for a stepped star: odd days that are Mondays.
	CHECK_EQ(Series("0 0 */2 * MON", "2026-01-01 00:00", 4),
			 "2026-01-05 00:00, 2026-01-19 00:00, 2026-02-09 00:00, 2026-02-23 00:00");
	CHECK_EQ(Series("0 0 1 * */2", "2026-01-01 00:00", 3), "2026-02-01 00:00, 2026-03-01 00:00, 2026-08-01 00:00");
	// Months.
	CHECK_EQ(Series("0 0 1 JAN-MAR *", "2026-01-01 00:00", 3), "2026-02-01 00:00, 2026-03-01 00:00, 2027-01-01 00:00");
	CHECK_EQ(Next("0 0 1 1 *", "2026-01-01 00:00"), "2027-01-01 00:00");
	// Year rollover.
	CHECK_EQ(Next("59 23 31 12 *", "2026-12-31 23:59"), "2027-12-31 23:59");
	CHECK_EQ(Next("59 23 31 12 *", "2026-12-31 23:58:59"), "2026-12-31 23:59");
	CHECK_EQ(Next("* * * * *", "2026-12-31 23:59"), "2027-01-01 00:00");
	CHECK_EQ(Next("0 0 * * *", "2026-12-31 00:00"), "2027-01-01 00:00");
	// Before the epoch and far out.
	CHECK_EQ(Next("0 0 1 1 *", "1969-06-01 00:00"), "1970-01-01 00:00");
	CHECK_EQ(Next("30 12 * * *", "1900-01-01 00:00"), "1900-01-01 12:30");
	CHECK_EQ(Next("0 0 29 2 *", "1896-03-01 00:00"), "1904-02-29 00:00");
	CHECK_EQ(Next("0 0 1 1 *", "2399-12-31 23:59:59"), "2400-01-01 00:00");

	// Domain limits: refused, never UB; near the limit still works.
	const Schedule every = Parse("* * * * *").schedule;
	int64_t next = 0;
	CHECK(!NextFire(every, INT64_MAX, Utc(), &next));
	CHECK(!NextFire(every, INT64_MIN, Utc(), &next));
	CHECK(!NextFire(every, 8'000'000'000'000'000'001, Utc(), &next));
	CHECK(NextFire(every, 8'000'000'000'000'000'000, Utc(), &next) && next == 8'000'000'000'000'000'000 + 40 * kMicros);
	CHECK(NextFire(every, -8'000'000'000'000'000'000, Utc(), &next) && next > -8'000'000'000'000'000'000 &&
		  next % (60 * kMicros) == 0);
	CHECK(NextFire(Parse("0 0 29 2 */7").schedule, 7'900'000'000'000'000'000, Utc(), &next));
}

void TestDstNewYork() {
	// Spring forward 2026-03-08 07:00Z: 02:00 EST becomes 03:00 EDT.
	CHECK_EQ(kNewYork.OffsetAt(Secs("2026-03-08 06:59:59")), -18000);
	CHECK_EQ(kNewYork.OffsetAt(Secs("2026-03-08 07:00")), -14400);
	CHECK_EQ(Series("30 2 * * *", "2026-03-07 12:00", 3, kNewYork),
			 "2026-03-08 07:00, 2026-03-09 06:30, 2026-03-10 06:30");
	CHECK_EQ(Series("0 3 * * *", "2026-03-07 12:00", 2, kNewYork), "2026-03-08 07:00, 2026-03-09 07:00");
	// 02:00 (skipped) and 03:00 land on the same instant: one fire, not two.
	CHECK_EQ(Series("0 2,3 * * *", "2026-03-07 12:00", 3, kNewYork),
			 "2026-03-08 07:00, 2026-03-09 06:00, 2026-03-09 07:00");
	CHECK_EQ(Series("*/15 * * * *", "2026-03-08 06:30", 4, kNewYork),
			 "2026-03-08 06:45, 2026-03-08 07:00, 2026-03-08 07:15, 2026-03-08 07:30");
	CHECK_EQ(Series("* * * * *", "2026-03-08 06:58", 3, kNewYork), "2026-03-08 06:59, 2026-03-08 07:00, 2026-03-08 07:01");
	CHECK_EQ(Series("0 * * * *", "2026-03-08 05:30", 3, kNewYork), "2026-03-08 06:00, 2026-03-08 07:00, 2026-03-08 08:00");
	CHECK_EQ(Next("59 2 * * *", "2026-03-08 07:00", kNewYork), "2026-03-09 06:59");
	{
		// Every real minute still fires; the 60 skipped labels collapse into 07:00Z.
		const auto fires = Walk("* * * * *", "2026-03-07 12:00", "2026-03-09 12:00", kNewYork, __LINE__);
		CHECK_EQ(fires.size(), size_t{48 * 60});
		// Hour 2: one fire for the whole gap on the 8th, sixty on the 9th.
		const auto gap = Walk("* 2 * * *", "2026-03-07 12:00", "2026-03-09 12:00", kNewYork, __LINE__);
		CHECK_EQ(gap.size(), size_t{61});
		CHECK_EQ(Show(gap.front()), "2026-03-08 07:00");
	}

	// Fall back 2026-11-01 06:00Z: 02:00 EDT becomes 01:00 EST.
	CHECK_EQ(kNewYork.OffsetAt(Secs("2026-11-01 05:59:59")), -14400);
	CHECK_EQ(kNewYork.OffsetAt(Secs("2026-11-01 06:00")), -18000);
	CHECK_EQ(Series("30 1 * * *", "2026-10-31 12:00", 2, kNewYork), "2026-11-01 05:30, 2026-11-02 06:30");
	CHECK_EQ(Next("30 1 * * *", "2026-11-01 05:30", kNewYork), "2026-11-02 06:30");
	CHECK_EQ(Series("0 * * * *", "2026-11-01 03:30", 4, kNewYork),
			 "2026-11-01 04:00, 2026-11-01 05:00, 2026-11-01 07:00, 2026-11-01 08:00");
	CHECK_EQ(Series("*/15 * * * *", "2026-11-01 05:30", 4, kNewYork),
			 "2026-11-01 05:45, 2026-11-01 07:00, 2026-11-01 07:15, 2026-11-01 07:30");
	CHECK_EQ(Next("* * * * *", "2026-11-01 05:59", kNewYork), "2026-11-01 07:00");
	CHECK_EQ(Next("* * * * *", "2026-11-01 06:00", kNewYork), "2026-11-01 07:00");
	CHECK_EQ(Next("* * * * *", "2026-11-01 06:30", kNewYork), "2026-11-01 07:00");
	CHECK_EQ(Next("0 2 * * *", "2026-11-01 05:59:59", kNewYork), "2026-11-01 07:00");
	CHECK_EQ(Next("0 1 * * *", "2026-11-01 06:00", kNewYork), "2026-11-02 06:00");
	{
		// The repeated hour is silent the second time, and nothing else is lost.
		const auto fires = Walk("* * * * *", "2026-10-31 12:00", "2026-11-02 12:00", kNewYork, __LINE__);
		CHECK_EQ(fires.size(), size_t{48 * 60 - 60});
		const auto hourly = Walk("0 * * * *", "2026-10-31 12:00", "2026-11-02 12:00", kNewYork, __LINE__);
		CHECK_EQ(hourly.size(), size_t{47});
		int in_fold = 0;
		for (int64_t f : fires)
			in_fold += f >= Us("2026-11-01 06:00") && f < Us("2026-11-01 07:00");
		CHECK_EQ(in_fold, 0);
	}
}

void TestDstBerlin() {
	// Spring forward 2026-03-29 01:00Z: 02:00 CET becomes 03:00 CEST.
	CHECK_EQ(Series("30 2 * * *", "2026-03-28 12:00", 2, kBerlin), "2026-03-29 01:00, 2026-03-30 00:30");
	CHECK_EQ(Series("0 * * * *", "2026-03-28 23:30", 3, kBerlin), "2026-03-29 00:00, 2026-03-29 01:00, 2026-03-29 02:00");
	// Fall back 2026-10-25 01:00Z: 03:00 CEST becomes 02:00 CET.
	CHECK_EQ(Series("30 2 * * *", "2026-10-24 12:00", 2, kBerlin), "2026-10-25 00:30, 2026-10-26 01:30");
	CHECK_EQ(Series("0 * * * *", "2026-10-24 23:30", 4, kBerlin),
			 "2026-10-25 00:00, 2026-10-25 02:00, 2026-10-25 03:00, 2026-10-25 04:00");
	CHECK_EQ(Walk("* * * * *", "2026-03-28 00:00", "2026-03-30 00:00", kBerlin, __LINE__).size(), size_t{48 * 60});
	CHECK_EQ(Walk("* * * * *", "2026-10-24 00:00", "2026-10-26 00:00", kBerlin, __LINE__).size(), size_t{48 * 60 - 60});
	CHECK_EQ(Walk("0 2 * * *", "2026-01-01 00:00", "2027-01-01 00:00", kBerlin, __LINE__).size(), size_t{365});
}

void TestOtherZones() {
	CHECK_EQ(Next("0 9 * * *", "2026-01-01 00:00", kIndia), "2026-01-01 03:30");
	CHECK_EQ(Next("30 0 * * *", "2026-01-01 00:00", kIndia), "2026-01-01 19:00");
	CHECK_EQ(Next("0 0 1 1 *", "2026-06-01 00:00", kIndia), "2026-12-31 18:30");
	CHECK_EQ(Next("*/45 * * * *", "2026-01-01 00:00", kIndia), "2026-01-01 00:15");
	CHECK_EQ(Next("0 0 1 1 *", "2026-06-01 00:00", kPacific), "2027-01-01 08:00");
	CHECK_EQ(Next("0 23 * * FRI", "2026-01-01 00:00", kPacific), "2026-01-03 07:00");
	CHECK_EQ(Next("0 0 * * *", "2026-01-01 00:00", kNewfoundland), "2026-01-01 03:30");
	CHECK_EQ(Next("0 0 * * *", "2026-01-01 03:30", kNewfoundland), "2026-01-02 03:30");
	CHECK_EQ(Next("0 0 1 1 *", "2026-06-01 00:00", kKiribati), "2026-12-31 10:00");
	CHECK_EQ(Next("0 0 * * MON", "2026-01-04 00:00", kKiribati), "2026-01-04 10:00");
	CHECK_EQ(Next("0 0 * * *", "2026-01-01 00:00", kLmt), "2026-01-01 04:56:02");
	// Half-hour DST step: local 02:15 is skipped, 02:45 exists.
	CHECK_EQ(Series("15,45 2 * * *", "2026-10-03 12:00", 3, kLordHowe),
			 "2026-10-03 15:30, 2026-10-03 15:45, 2026-10-04 15:15");
	// A whole skipped day collapses into one fire at its end.
	CHECK_EQ(Series("0 12 * * *", "2011-12-29 00:00", 3, kSamoa), "2011-12-29 22:00, 2011-12-30 10:00, 2011-12-30 22:00");
	CHECK_EQ(Series("0 0 30 12 *", "2011-12-01 00:00", 2, kSamoa), "2011-12-30 10:00, 2012-12-29 10:00");
	// A whole repeated day fires only during its first pass.
	CHECK_EQ(Series("0 12 * * *", "2029-12-31 12:00", 2, kReverseSamoa), "2029-12-31 22:00, 2030-01-02 22:00");
	CHECK_EQ(Next("0 12 * * *", "2030-01-01 12:00", kReverseSamoa), "2030-01-02 22:00");
	CHECK_EQ(Next("* * * * *", "2030-01-01 10:00", kReverseSamoa), "2030-01-02 10:00");
	CHECK_EQ(Walk("*/30 * * * *", "2029-12-30 00:00", "2030-01-04 00:00", kReverseSamoa, __LINE__).size(),
			 size_t{5 * 48 - 48});
}

void TestManyCallsStayCheap() {
	// Worst cases of the field search; a minute-by-minute search would take minutes here.
	const char *const kHard[] = {"0 0 29 2 */7", "59 23 31 12 *", "0 0 29 2 *", "0 0 13 * FRI", "* * * * *"};
	int64_t fired = 0;
	for (const char *expr : kHard) {
		const Schedule s = Parse(expr).schedule;
		for (int64_t i = 0; i < 2000; ++i) {
			int64_t next = 0;
			const int64_t after = Us("2000-01-01 00:00") + i * 7919 * 60 * kMicros;
			fired += NextFire(s, after, kNewYork, &next) && next > after;
		}
	}
	CHECK_EQ(fired, int64_t{5 * 2000});

	// Inside a fold the answer is found directly, not by retrying minute after
	// minute: a couple of probes plus two binary searches over two days.
	const Schedule every = Parse("* * * * *").schedule;
	const struct {
		const TimeZone &zone;
		const char *after;
		const char *expected;
	} kFolds[] = {
		{kNewYork, "2026-11-01 06:00", "2026-11-01 07:00"},
		{kNewYork, "2026-11-01 06:59:59", "2026-11-01 07:00"},
		{kReverseSamoa, "2030-01-01 10:00", "2030-01-02 10:00"},
		{kReverseSamoa, "2030-01-02 09:58", "2030-01-02 10:00"},
		{kNewYork, "2026-11-01 05:59:30", "2026-11-01 07:00"},
	};
	for (const auto &fold : kFolds) {
		const CountingZone counting(fold.zone);
		int64_t next = 0;
		CHECK(NextFire(every, Us(fold.after), counting, &next));
		CHECK_EQ(Show(next), fold.expected);
		CHECK(counting.calls <= 50);
	}
}

}	// namespace

int main() {
	TestCalendarHelpers();
	TestParseAccepts();
	TestParseRejects();
	TestNextUtc();
	TestDstNewYork();
	TestDstBerlin();
	TestOtherZones();
	TestManyCallsStayCheap();
	std::printf("cron: %d passed, %d failed\n", g_passed, g_failed);
	return g_failed > 0 ? 1 : 0;
}
