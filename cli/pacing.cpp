// cli/pacing.cpp -- interval parsing and absolute-deadline sleeps
#include "pacing.hpp"

#include <time.h>

#include <cerrno>

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

void sleep_until_ns(int64_t deadline_ns) {
  struct timespec when {};
  when.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
  when.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &when, nullptr) == EINTR) {
    if (g_stop_signal != 0 || g_child_changed != 0) return;
  }
}

int64_t next_deadline_ns(int64_t start_ns, int64_t interval_ns, int64_t now_ns) {
  if (now_ns < start_ns) return start_ns;
  const int64_t ticks = (now_ns - start_ns) / interval_ns + 1;
  return start_ns + ticks * interval_ns;
}

}  // namespace vramscope::cli
