/* src/pure/backoff.hpp — the retry delay schedule of the pqrun.backoff setting.
 *
 * Pure C++ (no PostgreSQL headers), so the GUC check hook can validate a
 * value without raising errors and the parser can be unit-tested alone.
 */
#pragma once

#include <cstdint>
#include <string_view>

namespace pqrun::backoff {

constexpr int kMaxSteps = 32;

/* A century: the longest delay pqrun accepts anywhere (a backoff step,
 * retry_after, run_every, a wait), so that now() plus it is a valid
 * timestamp. */
constexpr int64_t kMaxDelayUs = 36525LL * 86400 * 1000000;

/* A parsed schedule: the delay before retry N is step_us[min(N, count) - 1]. */
struct Schedule {
	int count;
	int64_t step_us[kMaxSteps];
};

/* Parse reads a comma-separated list of durations such as "1min,5min,2h"
 * (units us, ms, s, min, h, d and their long forms; a bare number is seconds).
 * On failure it returns false and writes a message into error. */
bool Parse(std::string_view text, Schedule *out, char *error, int error_len) noexcept;

/* DelayFor returns the delay after failed attempt number `attempt` (1-based). */
int64_t DelayFor(const Schedule &schedule, int attempt) noexcept;

} // namespace pqrun::backoff
