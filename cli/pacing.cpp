// cli/pacing.cpp -- interval parsing and absolute-deadline sleeps
#include "pacing.hpp"

#include <time.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "stop_signals.hpp"
#include "vramscope/status.hpp"
#include "vramscope/units.hpp"

namespace vramscope::cli {

int64_t parse_interval_ns(const std::string& option, const std::string& text) {
  const std::optional<int64_t> parsed = parse_duration_ns(text);
  if (!parsed) {
    throw Error(option + ": cannot read '" + text + "' as a duration (e.g. 10ms, 0.5s, 2)",
                ExitUsage);
  }
  if (*parsed < minimum_interval_ns) {
    throw Error(option + ": '" + text + "' is below the 1ms minimum", ExitUsage);
  }
  if (*parsed > maximum_interval_ns) {
    throw Error(option + ": '" + text + "' is above the 24h maximum", ExitUsage);
  }
  return *parsed;
}

int64_t parse_positive_duration_ns(const std::string& option, const std::string& text) {
  const std::optional<int64_t> parsed = parse_duration_ns(text);
  if (!parsed || *parsed <= 0) {
    throw Error(option + ": cannot read '" + text + "' as a positive duration (e.g. 30s, 5m)",
                ExitUsage);
  }
  return *parsed;
}

struct timespec deadline_timespec(int64_t deadline_ns) {
  struct timespec when {};
  if (deadline_ns <= 0) return when;
  when.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
  when.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
  return when;
}

void sleep_until_ns(int64_t deadline_ns) {
  const struct timespec when = deadline_timespec(deadline_ns);
  for (;;) {
    // clock_nanosleep returns the error number itself (not -1 and errno).
    const int failed = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &when, nullptr);
    if (failed == 0) return;
    if (failed != EINTR) {
      throw Error(std::string("clock_nanosleep: ") + std::strerror(failed), ExitError);
    }
    if (g_stop_signal != 0 || g_child_changed != 0) return;
  }
}

int64_t next_deadline_ns(int64_t start_ns, int64_t interval_ns, int64_t now_ns) {
  constexpr int64_t never_ns = std::numeric_limits<int64_t>::max();
  if (now_ns < start_ns) return start_ns;
  if (interval_ns <= 0) return now_ns;
  // now_ns - start_ns cannot overflow (now_ns >= start_ns, both from the same clock) unless the
  // start is negative; saturating keeps even that case a deadline after now.
  int64_t elapsed_ns = 0;
  if (__builtin_sub_overflow(now_ns, start_ns, &elapsed_ns)) return never_ns;
  const int64_t ticks = elapsed_ns / interval_ns + 1;
  int64_t offset_ns = 0;
  int64_t deadline_ns = 0;
  if (__builtin_mul_overflow(ticks, interval_ns, &offset_ns) ||
      __builtin_add_overflow(start_ns, offset_ns, &deadline_ns)) {
    return never_ns;
  }
  return deadline_ns;
}

}  // namespace vramscope::cli
