// src/core/clock.cpp -- CLOCK_REALTIME for timestamps, CLOCK_MONOTONIC for intervals
//
// clock_gettime rather than std::chrono so that the clock ids are explicit: steady_clock's
// epoch is unspecified, and recordings must carry wall time comparable across processes.
#include "vramscope/clock.hpp"

#include <time.h>

#include <array>
#include <cstdio>

namespace vramscope {
namespace {

int64_t read_clock_ns(clockid_t clock) {
  timespec now{};
  // clock_gettime cannot fail for these two clock ids on Linux.
  clock_gettime(clock, &now);
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

}  // namespace

int64_t wall_time_ns() { return read_clock_ns(CLOCK_REALTIME); }

int64_t monotonic_ns() { return read_clock_ns(CLOCK_MONOTONIC); }

std::string local_time_text(int64_t timestamp_ns, TimeText style) {
  const auto seconds = static_cast<time_t>(timestamp_ns / 1'000'000'000);
  struct tm parts {};
  localtime_r(&seconds, &parts);
  std::array<char, 32> text{};
  if (style == TimeText::ClockMillis) {
    const auto millis = static_cast<int>((timestamp_ns / 1'000'000) % 1000);
    std::snprintf(text.data(), text.size(), "%02d:%02d:%02d.%03d", parts.tm_hour, parts.tm_min,
                  parts.tm_sec, millis);
  } else {
    // The post-mortem stamp must match the one python/vramscope/postmortem/report.py writes.
    strftime(text.data(), text.size(),
             style == TimeText::FileStamp ? "%Y%m%d-%H%M%S" : "%Y-%m-%d %H:%M:%S", &parts);
  }
  return text.data();
}

}  // namespace vramscope
