// cli/pacing.hpp -- sleeping to absolute deadlines so that a sampling cadence never drifts
#pragma once

#include <time.h>

#include <cstdint>
#include <optional>
#include <string>

namespace vramscope::cli {

/// Shortest sampling interval accepted by watch and record.
inline constexpr int64_t minimum_interval_ns = 1'000'000;
/// Longest sampling interval accepted by watch, record, run and exporter: a day. Far below where
/// deadline arithmetic could overflow (2^63 ns is 292 years), and longer is surely a typo.
inline constexpr int64_t maximum_interval_ns = 24LL * 3600 * 1'000'000'000;

/// Parses an --interval value ("10ms", "0.5s", "2" = seconds) with parse_duration_ns; throws a
/// usage Error (exit 2) for bad text, anything below 1 ms or above maximum_interval_ns.
int64_t parse_interval_ns(const std::string& option, const std::string& text);

/// Parses a --duration value; throws a usage Error for bad text or a non-positive duration.
int64_t parse_positive_duration_ns(const std::string& option, const std::string& text);

/// Sleeps on CLOCK_MONOTONIC until `deadline_ns` (TIMER_ABSTIME). Returns early when a stop or
/// child signal arrived (see stop_signals.hpp); other interruptions resume the sleep. Any other
/// failure of clock_nanosleep is not a wake-up: it throws (a caller looping on it would spin).
void sleep_until_ns(int64_t deadline_ns);

/// `deadline_ns` as an absolute timespec for clock_nanosleep; a negative deadline (long past)
/// becomes zero rather than a negative tv_nsec, which the kernel refuses with EINVAL.
struct timespec deadline_timespec(int64_t deadline_ns);

/// The first deadline after `now_ns` on the grid `start_ns + k * interval_ns`: a slow sample
/// skips ticks instead of shifting every later one. Saturates at INT64_MAX instead of wrapping,
/// so an enormous interval means "never" rather than a deadline in the past.
int64_t next_deadline_ns(int64_t start_ns, int64_t interval_ns, int64_t now_ns);

}  // namespace vramscope::cli
