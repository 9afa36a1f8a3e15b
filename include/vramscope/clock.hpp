// include/vramscope/clock.hpp -- the two clocks vramscope uses, named so call sites say which
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace vramscope {

/// CLOCK_REALTIME in ns: timestamps stored in samples and recordings.
int64_t wall_time_ns();

/// CLOCK_MONOTONIC in ns: intervals, deadlines and durations.
int64_t monotonic_ns();

/// How local_time_text() writes a local time.
enum class TimeText : uint8_t {
  /// "2026-12-01 09:30:00" (whole seconds): tables, summaries, the TUI.
  DateTime,
  /// "09:30:00.123": one `watch` line per sample.
  ClockMillis,
  /// "20261201-093000": the stamp in the agent's post-mortem file names.
  FileStamp,
};

/// A wall_time_ns() timestamp as local time.
std::string local_time_text(int64_t timestamp_ns, TimeText style = TimeText::DateTime);

// Timestamps read from recordings and agent segments may hold any int64: arithmetic on them
// saturates instead of overflowing (undefined behaviour, and a duration printed as -2^63).

/// `a + b`, clamped to the int64 range.
inline int64_t saturating_add_ns(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

/// `a - b`, clamped to the int64 range.
inline int64_t saturating_sub_ns(int64_t a, int64_t b) {
  int64_t difference = 0;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

/// A double number of ns as int64, clamped (NaN is 0): casting an out-of-range double is
/// undefined behaviour.
inline int64_t clamp_to_ns(double ns) {
  if (std::isnan(ns)) return 0;
  // 2^63 is exactly representable; anything at or above it does not fit.
  if (ns >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (ns <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(ns);
}

}  // namespace vramscope
