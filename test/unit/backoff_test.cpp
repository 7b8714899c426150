/* test/unit/backoff_test.cpp — the pqrun.backoff schedule parser. */
#include "pure/backoff.hpp"

#include <cstdio>
#include <cstring>

namespace {

int passed = 0;
int failed = 0;

void
Check(bool ok, const char *what)
{
	if (ok) {
		passed++;
	} else {
		failed++;
		printf("FAILED: %s\n", what);
	}
}

constexpr int64_t kS = 1000000;

} // namespace

int
main()
{
	using namespace pqrun::backoff;
	Schedule s;
	char error[256];

	Check(Parse("1min,5min,30min,2h,6h", &s, error, sizeof(error)), "default schedule parses");
	Check(s.count == 5, "default schedule has 5 steps");
	Check(DelayFor(s, 1) == 60 * kS, "attempt 1 waits 1 min");
	Check(DelayFor(s, 2) == 300 * kS, "attempt 2 waits 5 min");
	Check(DelayFor(s, 5) == 6 * 3600 * kS, "attempt 5 waits 6 h");
	Check(DelayFor(s, 9) == 6 * 3600 * kS, "the last step repeats");
	Check(DelayFor(s, 0) == 60 * kS, "attempt 0 is treated as 1");
	/* A step must leave run_after a valid timestamp: once '999999999d' was
	 * accepted and mark_error then stored a run_after out of range. */
	Check(!Parse("999999999d", &s, error, sizeof(error)), "a step beyond 100 years is refused");
	Check(!Parse("1000000000min", &s, error, sizeof(error)), "a step that overflows is refused");
	Check(Parse("36525d", &s, error, sizeof(error)) && s.step_us[0] == 36525LL * 86400 * kS, "100 years is allowed");

	Check(Parse(" 10 s , 250ms,1 day, 3 HOURS ,45", &s, error, sizeof(error)), "spaces, long units and case");
	Check(s.count == 5 && s.step_us[0] == 10 * kS && s.step_us[1] == 250000 && s.step_us[2] == 86400 * kS &&
	          s.step_us[3] == 3 * 3600 * kS && s.step_us[4] == 45 * kS,
	      "values of mixed units; a bare number is seconds");
	Check(Parse("0s", &s, error, sizeof(error)) && DelayFor(s, 3) == 0, "zero delay is allowed");

	Check(!Parse("", &s, error, sizeof(error)), "empty is rejected");
	Check(!Parse("1min,,5min", &s, error, sizeof(error)), "empty step is rejected");
	Check(!Parse("5 fortnights", &s, error, sizeof(error)) && strstr(error, "\"5 fortnights\"") != nullptr,
	      "unknown unit is rejected and quoted");
	Check(!Parse("-1s", &s, error, sizeof(error)), "negative is rejected");
	Check(!Parse("1.5s", &s, error, sizeof(error)), "fractions are rejected");
	Check(!Parse("99999999999999s", &s, error, sizeof(error)), "overflow is rejected");
	char many[512] = "";
	for (int i = 0; i < kMaxSteps + 1; i++)
		strcat(many, i ? ",1s" : "1s");
	Check(!Parse(many, &s, error, sizeof(error)), "too many steps are rejected");

	printf("backoff: %d passed, %d failed\n", passed, failed);
	return failed == 0 ? 0 : 1;
}
