// tests/cpp/exporters/test_metrics_cache.cpp -- scrapes read the cache; the source is sampled per refresh only
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "vramscope/exporters/metrics_cache.hpp"

namespace vramscope::exporters {
namespace {

TEST(MetricsCache, ManyReadersNeverSampleTheSource) {
  std::atomic<int> calls{0};
  // A long interval: only start()'s synchronous refresh may run during the test.
  MetricsCache cache(
      [&](SystemSample& out) {
        ++calls;
        out = test::make_large_sample(8, 64);
        return true;
      },
      3600LL * 1000000000LL, {});
  cache.start();
  std::vector<std::thread> readers;
  std::atomic<std::size_t> total{0};
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) total += cache.body()->size();
    });
  }
  for (auto& reader : readers) reader.join();
  cache.stop();
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(cache.refresh_count(), 1U);
  EXPECT_GT(total.load(), 2000U * 10000U);
  EXPECT_NE(cache.body()->find("vramscope_up 1\n"), std::string::npos);
}

TEST(MetricsCache, FailingSourceRendersUpZeroAndKeepsAgents) {
  MetricsCache cache(
      [](SystemSample& out) {
        out.allocators.push_back(AllocatorSample{});
        return false;
      },
      1000000000LL, {});
  cache.refresh();
  EXPECT_NE(cache.body()->find("vramscope_up 0\n"), std::string::npos);
  EXPECT_NE(cache.body()->find("vramscope_torch_allocated_bytes{"), std::string::npos);
  EXPECT_EQ(cache.last_error(), "driver backend failed");
}

TEST(MetricsCache, CategoriesOfTheLatestStepOutliveTheSampleThatBroughtThem) {
  // The sampler hands each step over once; the exposition must keep showing the latest one while
  // the process lives, and drop it when its agent is gone.
  int refresh = 0;
  MetricsCache cache(
      [&](SystemSample& out) {
        out = test::make_rich_sample();
        if (refresh > 0) out.steps.clear();
        if (refresh > 1) out.allocators.clear();
        ++refresh;
        return true;
      },
      1000000000LL, {});
  const std::string series = "vramscope_category_bytes{gpu=\"0\"";
  cache.refresh();
  EXPECT_NE(cache.body()->find(series), std::string::npos);
  cache.refresh();
  EXPECT_NE(cache.body()->find(series), std::string::npos) << "kept after the sample without steps";
  EXPECT_NE(cache.body()->find("category=\"gradients\"} 3221225472\n"), std::string::npos);
  cache.refresh();
  EXPECT_EQ(cache.body()->find("vramscope_category_bytes"), std::string::npos) << "agent gone";
}

TEST(MetricsCache, ThrowingSourceIsContained) {
  MetricsCache cache([](SystemSample&) -> bool { throw std::runtime_error("NVML exploded"); },
                     1000000000LL, {});
  cache.refresh();
  EXPECT_NE(cache.body()->find("vramscope_up 0\n"), std::string::npos);
  EXPECT_EQ(cache.last_error(), "NVML exploded");
}

// The thread refreshes by itself, and stop() returns promptly even with a long interval pending.
TEST(MetricsCache, ThreadRefreshesAndStops) {
  std::atomic<int> calls{0};
  MetricsCache cache(
      [&](SystemSample&) {
        ++calls;
        return true;
      },
      1000000LL, {});
  cache.start();
  while (cache.refresh_count() < 5) std::this_thread::yield();
  cache.stop();
  const int after_stop = calls.load();
  EXPECT_GE(after_stop, 5);
  EXPECT_EQ(static_cast<uint64_t>(after_stop), cache.refresh_count());
}

// An interval near 2^63 ns wrapped `deadline += interval` into the past: wait_until returned at
// once and the thread refreshed in a busy loop.
TEST(NextRefreshDeadline, SaturatesAndNeverLandsInThePast) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  const auto huge = std::chrono::nanoseconds(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(next_refresh_deadline(now, huge, now), Clock::time_point::max());
  EXPECT_EQ(next_refresh_deadline(now, std::chrono::seconds(1), now),
            now + std::chrono::seconds(1));
  // More than an interval behind: restart from now instead of bursting.
  const Clock::time_point behind = now - std::chrono::seconds(10);
  EXPECT_EQ(next_refresh_deadline(behind, std::chrono::seconds(1), now),
            now + std::chrono::seconds(1));
  EXPECT_EQ(next_refresh_deadline(Clock::time_point::min(), std::chrono::seconds(1), now),
            now + std::chrono::seconds(1));
}

}  // namespace
}  // namespace vramscope::exporters
