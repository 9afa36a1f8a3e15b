// cli/pacing.hpp -- sleeping to absolute deadlines so that a sampling cadence never drifts
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vramscope::cli {

/// Shortest sampling interval accepted by watch and record.
inline constexpr int64_t minimum_interval_ns = 1'000'000;

/// Parses an --interval value ("10ms", "0.5s", "2" = seconds) with parse_duration_ns; throws a
/// usage Error (exit 2) for bad text or anything below 1 ms.
int64_t parse_interval_ns(const std::string& option, const std::string& text);

/// Parses a --duration value; throws a usage Error for bad text or a non-positive duration.
int64_t parse_positive_duration_ns(const std::string& option, const std::string& text);

/// Sleeps on CLOCK_MONOTONIC until `deadline_ns` (TIMER_ABSTIME). Returns early when a stop or
/// child signal arrived (see stop_signals.hpp); other interruptions resume the sleep.
void sleep_until_ns(int64_t deadline_ns);

/// The first deadline after `now_ns` on the grid `start_ns + k * interval_ns`: a slow sample
/// skips ticks instead of shifting every later one.
int64_t next_deadline_ns(int64_t start_ns, int64_t interval_ns, int64_t now_ns);

}  // namespace vramscope::cli
