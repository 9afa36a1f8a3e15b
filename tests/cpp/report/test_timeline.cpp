// tests/cpp/report/test_timeline.cpp -- binning for display keeps every peak and adds up
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "format/memory_limit.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/report/timeline.hpp"

namespace vramscope::report {
namespace {

using testing::make_two_gpu_sample;
using testing::mib;

/// `count` samples 100 ms apart; GPU 0 and the trainer use 1000 MiB more at sample `spike`.
Timeline binned(std::size_t count, std::size_t spike, std::size_t bins) {
  TimelineCollector collector(bins, 100'000'000);
  SystemSample s = make_two_gpu_sample();
  const uint64_t base_used = *s.devices[0].used_bytes;
  for (std::size_t i = 0; i < count; ++i) {
    const uint64_t extra = i == spike ? 1000 * mib : (i % 7) * mib;
    s.devices[0].used_bytes = base_used + extra;
    s.devices[0].processes[0].used_bytes = 30000 * mib + extra;
    s.allocators[0].reserved_bytes = 24576 * mib + extra;
    collector.add(s);
    s.timestamp_ns += 100'000'000;
  }
  return collector.finish();
}

TEST(Timeline, BinsAreBoundedAndKeepEveryPeak) {
  const std::size_t spike = 77'777;
  const Timeline t = binned(100'000, spike, 500);
  EXPECT_LE(t.bin_count, 500U);
  EXPECT_GE(t.bin_count, 250U);
  ASSERT_EQ(t.devices.size(), 2U);
  const TimelineDevice& gpu0 = t.devices[0];
  const auto top = std::max_element(
      gpu0.bins.begin(), gpu0.bins.end(),
      [](const DeviceBin& a, const DeviceBin& b) { return a.used_bytes < b.used_bytes; });
  const SystemSample s = make_two_gpu_sample();
  EXPECT_EQ(top->used_bytes, static_cast<double>(*s.devices[0].used_bytes + 1000 * mib));
  // The spike's bin is where its time says.
  const std::size_t expected_bin = spike * 100'000'000ULL / t.bin_ns;
  EXPECT_EQ(static_cast<std::size_t>(top - gpu0.bins.begin()), expected_bin);
  // Every bin holds a sample's maximum, never an average: the small wobble (0..6 MiB) shows.
  for (const DeviceBin& b : gpu0.bins)
    EXPECT_GE(b.used_bytes, static_cast<double>(*s.devices[0].used_bytes));
}

TEST(Timeline, DecompositionAtTheBinPeakAddsUpToDriverUse) {
  const Timeline t = binned(1000, 500, 100);
  const TimelineProcess* trainer = nullptr;
  for (const TimelineProcess& p : t.processes) {
    if (p.pid == 4021) trainer = &p;
  }
  ASSERT_NE(trainer, nullptr);
  EXPECT_TRUE(trainer->any_torch && trainer->any_driver);
  for (const ProcessBin& b : trainer->bins) {
    ASSERT_TRUE(b.seen);
    EXPECT_EQ(b.peak_allocated_bytes + b.peak_cached_free_bytes + b.peak_outside_pytorch_bytes,
              b.used_bytes);
    EXPECT_EQ(b.peak_allocated_bytes, static_cast<double>(20480 * mib));
  }
  // Xorg has no agent: all of its use is outside PyTorch.
  for (const TimelineProcess& p : t.processes) {
    if (p.pid == 5177) {
      EXPECT_EQ(p.bins[0].peak_outside_pytorch_bytes, static_cast<double>(900 * mib));
    }
  }
}

TEST(Timeline, ProcessesThatChangePlacesKeepTheirOwnSeries) {
  // add() first tries the entry the same row found in the previous sample: the trainer and
  // Xorg swap places (and a GPU comes first), so each must land in its own series.
  TimelineCollector collector(100, 100'000'000);
  SystemSample s = make_two_gpu_sample();
  collector.add(s);
  s.timestamp_ns += 100'000'000;
  std::swap(s.devices[0].processes[0], s.devices[0].processes[1]);
  s.devices[0].processes[0].used_bytes = 2000 * mib;   // Xorg
  s.devices[0].processes[1].used_bytes = 31000 * mib;  // the trainer
  collector.add(s);
  s.timestamp_ns += 100'000'000;
  std::swap(s.devices[0], s.devices[1]);
  collector.add(s);
  const Timeline t = collector.finish();
  double xorg_peak = 0;
  double trainer_peak = 0;
  for (const TimelineProcess& p : t.processes) {
    for (const ProcessBin& b : p.bins) {
      if (p.pid == 5177) xorg_peak = std::max(xorg_peak, b.used_bytes);
      if (p.pid == 4021) trainer_peak = std::max(trainer_peak, b.used_bytes);
    }
  }
  EXPECT_EQ(xorg_peak, static_cast<double>(2000 * mib));
  EXPECT_EQ(trainer_peak, static_cast<double>(31000 * mib));
  EXPECT_EQ(t.processes.size(), 2U);
}

TEST(Timeline, BinsWithoutSamplesHoldThePreviousOne) {
  TimelineCollector collector(100, 1'000'000);
  SystemSample s = make_two_gpu_sample();
  collector.add(s);
  s.timestamp_ns += 50'000'000;  // 50 bins of 1 ms later: 49 bins saw nothing
  s.devices[0].used_bytes = *s.devices[0].used_bytes + mib;
  collector.add(s);
  const Timeline t = collector.finish();
  ASSERT_EQ(t.bin_count, 51U);
  const double first = t.devices[0].bins[0].used_bytes;
  for (std::size_t i = 1; i < 50; ++i) EXPECT_EQ(t.devices[0].bins[i].used_bytes, first) << i;
  EXPECT_EQ(t.devices[0].bins[50].used_bytes, first + static_cast<double>(mib));
}

TEST(Timeline, AClockStepBackLandsInTheFirstBin) {
  TimelineCollector collector(10, 1'000'000);
  SystemSample s = make_two_gpu_sample();
  collector.add(s);
  s.timestamp_ns -= 1'000'000'000'000;
  collector.add(s);
  EXPECT_EQ(collector.finish().bin_count, 1U);
}

/// Two samples 40 s apart (40,000 bins of 1 ms at most) of `processes` processes on one GPU.
std::vector<SystemSample> crowd(uint32_t processes) {
  std::vector<SystemSample> out(2, make_two_gpu_sample());
  out[1].timestamp_ns += 40'000'000'000;
  for (SystemSample& s : out) {
    s.devices.resize(1);
    s.allocators.clear();
    s.steps.clear();
    s.ooms.clear();
    s.devices[0].processes.resize(1);
    for (uint32_t pid = 2; pid <= processes; ++pid) {
      ProcessSample p = s.devices[0].processes[0];
      p.pid = 100000 + pid;
      p.used_bytes = pid * mib;
      s.devices[0].processes.push_back(p);
    }
  }
  return out;
}

TEST(Timeline, ThousandsOfProcessesFoldIntoOtherWithinTheBinBudget) {
  // 5,000 processes at --bins 20000: 40,000 live bins each, ~14 GB before the caps.
  const std::vector<SystemSample> samples = crowd(5000);
  EXPECT_EXIT(
      {
        testing::limit_address_space(1ULL << 30U);
        TimelineCollector collector(20000, 0);
        for (const SystemSample& s : samples) collector.add(s);
        const Timeline t = collector.finish();
        std::size_t others = 0;
        for (const TimelineProcess& p : t.processes) others += p.other ? 1 : 0;
        const std::size_t series = t.devices.size() + t.processes.size();
        const bool bounded = t.omitted && others == 1 &&
                             t.processes.size() == max_timeline_processes + 1 &&
                             series * t.bin_count <= max_timeline_series_bins;
        ::_exit(bounded ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Timeline, OtherProcessesStackTheirSum) {
  const std::vector<SystemSample> samples = crowd(max_timeline_processes + 3);
  TimelineCollector collector(100, 0);
  for (const SystemSample& s : samples) collector.add(s);
  const Timeline t = collector.finish();
  ASSERT_TRUE(t.processes.back().other);
  // The three processes past the cap (pids numbered from 2: the last three get 65..67 MiB).
  uint64_t sum = 0;
  for (const ProcessSample& p : samples[0].devices[0].processes) {
    if (p.pid > 100000 + max_timeline_processes) sum += *p.used_bytes;
  }
  EXPECT_EQ(t.processes.back().bins.front().used_bytes, static_cast<double>(sum));
  EXPECT_EQ(t.processes.back().bins.back().used_bytes, static_cast<double>(sum));
}

}  // namespace
}  // namespace vramscope::report
