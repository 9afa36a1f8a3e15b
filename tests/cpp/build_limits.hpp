// tests/cpp/build_limits.hpp -- what kind of build runs the tests, and CPU-time budgets scaled to it
//
// The tests that prove a reader linear run it on an input that a quadratic reader takes minutes
// or hours over, under a CPU-time limit (RLIMIT_CPU: SIGXCPU past it) set with a wide margin over
// what the dev build (RelWithDebInfo) needs. The same work takes the ASan+UBSan build at -O0
// about 9 times as long (RecordingIndex.AFileOfManySmallSegmentsReadsInLinearTime: 1.9 s dev,
// 16.3 s asan, 2 cores, 2026-12-03) and the TSan build more than 14 times (past 27 s), so a budget
// measured on dev is scaled here. Under TSan these tests are skipped instead: their readers are
// single-threaded, so TSan has no race to look for there, and the dev build measures the time.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace vramscope::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/// Is this build instrumented by ASan or TSan?
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

#if defined(__SANITIZE_THREAD__)
/// Is this build instrumented by ThreadSanitizer?
inline constexpr bool thread_sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool thread_sanitized_build = true;
#else
inline constexpr bool thread_sanitized_build = false;
#endif
#else
inline constexpr bool thread_sanitized_build = false;
#endif

/// How many times the dev build's CPU time this build may take for the same work: 12 for the
/// sanitizer builds (measured 9x, above), 4 for an unoptimised build without one, else 1.
#ifdef NDEBUG
inline constexpr rlim_t build_cpu_factor = sanitized_build ? 12 : 1;
#else
inline constexpr rlim_t build_cpu_factor = sanitized_build ? 12 : 4;
#endif

/// Limits this process's CPU time to `dev_seconds` as measured on the dev build, scaled by
/// build_cpu_factor (SIGXCPU past it, SIGKILL one second later). Call it in a child (EXPECT_EXIT).
inline void limit_cpu_seconds(rlim_t dev_seconds) {
  rlimit cpu{};
  cpu.rlim_cur = dev_seconds * build_cpu_factor;
  cpu.rlim_max = cpu.rlim_cur + 1;
  ::setrlimit(RLIMIT_CPU, &cpu);
}

}  // namespace vramscope::testing

/// Skips the calling test under ThreadSanitizer: a CPU-time bound on single-threaded code, which
/// TSan slows 14-fold or more and checks nothing in (the dev and ASan builds run it).
#define VRAMSCOPE_SKIP_TIME_BOUND_UNDER_TSAN()                                                \
  do {                                                                                        \
    if (::vramscope::testing::thread_sanitized_build) {                                       \
      GTEST_SKIP() << "a CPU-time bound on single-threaded code: the dev and ASan builds "    \
                      "check it, TSan slows it 14-fold or more and has no race to find here"; \
    }                                                                                         \
  } while (false)

/// Skips the calling test under ThreadSanitizer: an exhaustive sweep of single-threaded code (a
/// file cut at every byte, read back each time), which TSan slows 14-fold or more (160 s of the
/// TSan suite for one test) and has no race to find in; the dev and ASan builds run it.
#define VRAMSCOPE_SKIP_SINGLE_THREADED_SWEEP_UNDER_TSAN()                                     \
  do {                                                                                        \
    if (::vramscope::testing::thread_sanitized_build) {                                       \
      GTEST_SKIP() << "an exhaustive sweep of single-threaded code: the dev and ASan builds " \
                      "run it, TSan slows it 14-fold or more and has no race to find here";   \
    }                                                                                         \
  } while (false)
