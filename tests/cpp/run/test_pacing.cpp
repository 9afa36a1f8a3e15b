// tests/cpp/run/test_pacing.cpp -- interval bounds and deadline arithmetic of watch/record/run
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "pacing.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

constexpr int64_t int64_max = std::numeric_limits<int64_t>::max();

TEST(NextDeadline, StaysOnTheGrid) {
  EXPECT_EQ(next_deadline_ns(1000, 100, 1000), 1100);
  EXPECT_EQ(next_deadline_ns(1000, 100, 1250), 1300);
  EXPECT_EQ(next_deadline_ns(1000, 100, 500), 1000);
}

// An interval near 2^63 ns wrapped the deadline negative: every sleep returned at once and the
// loop wrote samples as fast as it could.
TEST(NextDeadline, SaturatesInsteadOfWrapping) {
  const int64_t start_ns = 5'000'000'000;
  EXPECT_EQ(next_deadline_ns(start_ns, int64_max, start_ns), int64_max);
  EXPECT_EQ(next_deadline_ns(start_ns, int64_max - 1, start_ns + 10), int64_max);
  EXPECT_EQ(next_deadline_ns(int64_max - 10, 100, int64_max - 5), int64_max);
  EXPECT_GT(next_deadline_ns(start_ns, int64_max / 2, start_ns + int64_max / 2), start_ns);
}

TEST(DeadlineTimespec, NeverHandsTheKernelANegativeField) {
  const struct timespec past = deadline_timespec(-1);
  EXPECT_EQ(past.tv_sec, 0);
  EXPECT_EQ(past.tv_nsec, 0);
  const struct timespec later = deadline_timespec(3'000'000'007);
  EXPECT_EQ(later.tv_sec, 3);
  EXPECT_EQ(later.tv_nsec, 7);
  EXPECT_GE(deadline_timespec(int64_max).tv_sec, 9'223'372'036);
}

// A deadline far in the past is a plain return (before, tv_nsec = -1 made clock_nanosleep fail
// with EINVAL, which was taken as a wake-up).
TEST(SleepUntil, PastDeadlineReturns) {
  sleep_until_ns(-1);
  sleep_until_ns(std::numeric_limits<int64_t>::min());
  SUCCEED();
}

TEST(ParseInterval, BoundedOnBothSides) {
  EXPECT_EQ(parse_interval_ns("--interval", "10ms"), 10'000'000);
  EXPECT_EQ(parse_interval_ns("--interval", "24h"), maximum_interval_ns);
  for (const char* text : {"9223372036854775807ns", "25h", "1441m", "86401"}) {
    try {
      parse_interval_ns("--interval", text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), ExitUsage) << text;
      EXPECT_NE(std::string(e.what()).find("24h maximum"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vramscope::cli
