/* src/pure/backoff.cpp — parser for the pqrun.backoff retry schedule.
 *
 * Kept free of PostgreSQL headers: it runs inside a GUC check hook, where
 * raising an error is not allowed, and is tested by test/unit.
 */
#ifdef POSTGRES_H
#error "backoff.cpp must stay free of PostgreSQL headers"
#endif

#include "pure/backoff.hpp"

#include <cctype>
#include <cstdio>

namespace pqrun::backoff {

namespace {

struct Unit {
	const char *name;
	int64_t us;
};

constexpr int64_t kSecond = 1000000;
constexpr Unit kUnits[] = {
    {"us", 1},
    {"ms", 1000},
    {"s", kSecond},
    {"sec", kSecond},
    {"second", kSecond},
    {"seconds", kSecond},
    {"min", 60 * kSecond},
    {"minute", 60 * kSecond},
    {"minutes", 60 * kSecond},
    {"h", 3600 * kSecond},
    {"hour", 3600 * kSecond},
    {"hours", 3600 * kSecond},
    {"d", 86400 * kSecond},
    {"day", 86400 * kSecond},
    {"days", 86400 * kSecond},
};

std::string_view
Trim(std::string_view s)
{
	while (!s.empty() && isspace(static_cast<unsigned char>(s.front())))
		s.remove_prefix(1);
	while (!s.empty() && isspace(static_cast<unsigned char>(s.back())))
		s.remove_suffix(1);
	return s;
}

bool
ParseStep(std::string_view item, int64_t *us)
{
	item = Trim(item);
	size_t digits = 0;
	int64_t number = 0;
	while (digits < item.size() && isdigit(static_cast<unsigned char>(item[digits]))) {
		if (number > 1000000000)
			return false;
		number = number * 10 + (item[digits] - '0');
		digits++;
	}
	if (digits == 0)
		return false;
	std::string_view unit = Trim(item.substr(digits));
	int64_t per = unit.empty() ? kSecond : 0;
	for (const Unit &u : kUnits) {
		if (per != 0 || unit.size() != std::char_traits<char>::length(u.name))
			continue;
		bool same = true;
		for (size_t i = 0; i < unit.size() && same; i++)
			same = tolower(static_cast<unsigned char>(unit[i])) == u.name[i];
		if (same)
			per = u.us;
	}
	/* A retry's run_after must stay a valid timestamp. */
	if (per == 0 || number > kMaxDelayUs / per)
		return false;
	*us = number * per;
	return true;
}

} // namespace

bool
Parse(std::string_view text, Schedule *out, char *error, int error_len) noexcept
{
	out->count = 0;
	if (Trim(text).empty()) {
		snprintf(error, error_len, "the schedule is empty");
		return false;
	}
	while (true) {
		size_t comma = text.find(',');
		std::string_view item = text.substr(0, comma);
		if (out->count == kMaxSteps) {
			snprintf(error, error_len, "at most %d steps are allowed", kMaxSteps);
			return false;
		}
		if (!ParseStep(item, &out->step_us[out->count])) {
			std::string_view bad = Trim(item);
			snprintf(
			    error, error_len,
			    "invalid duration \"%.*s\" (expected a number with a unit such as 30s, 5min, 2h, at most 100 years)",
			    static_cast<int>(bad.size()), bad.data());
			return false;
		}
		out->count++;
		if (comma == std::string_view::npos)
			return true;
		text.remove_prefix(comma + 1);
	}
}

int64_t
DelayFor(const Schedule &schedule, int attempt) noexcept
{
	if (schedule.count == 0)
		return 0;
	int index = attempt < 1 ? 0 : attempt - 1;
	if (index >= schedule.count)
		index = schedule.count - 1;
	return schedule.step_us[index];
}

} // namespace pqrun::backoff
