// tests/cpp/tracking/test_device_counters.cpp -- event counters against a reference allocator
#include <gtest/gtest.h>

#include <random>

#include "tracking/reference_allocator.hpp"
#include "vramscope/tracking/device_counters.hpp"

namespace vramscope::tracking {
namespace {

using testing::ReferenceAllocator;
using testing::ReferenceSettings;

ReferenceAllocator::Sink sink_into(DeviceCounters& counters) {
  return [&counters](Action action, uint64_t size, uint64_t, uint8_t) {
    counters.on_event(action, size);
  };
}

std::function<std::optional<CounterSeed>()> seed_from(ReferenceAllocator& model) {
  return [&model]() -> std::optional<CounterSeed> { return model.stats(); };
}

void expect_matches(DeviceCounters& counters, ReferenceAllocator& model, int op) {
  const CounterSeed truth = model.stats();
  ASSERT_EQ(counters.reserved_bytes(), truth.reserved_bytes) << "after operation " << op;
  ASSERT_EQ(counters.requested_bytes(), truth.requested_bytes) << "after operation " << op;
  ASSERT_EQ(counters.pending_free_bytes(), model.pending_bytes()) << "after operation " << op;
  const EventPeaks global = counters.peaks(PeakMark::Global);
  ASSERT_EQ(global.reserved_bytes, truth.peak_reserved_bytes) << "after operation " << op;
  ASSERT_EQ(global.requested_bytes, truth.peak_requested_bytes) << "after operation " << op;
}

class CountersVsModel : public ::testing::TestWithParam<std::tuple<uint64_t, bool>> {};

TEST_P(CountersVsModel, ExactFromAttachAtStart) {
  const auto [seed, expandable] = GetParam();
  ReferenceAllocator model(seed, expandable);
  DeviceCounters counters;
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  for (int op = 0; op < 20'000; ++op) {
    model.random_operation();
    expect_matches(counters, model, op);
  }
  EXPECT_EQ(counters.anomaly_count(), 0U);
}

TEST_P(CountersVsModel, ExactAfterLateAttachAndSeed) {
  const auto [seed, expandable] = GetParam();
  ReferenceAllocator model(seed, expandable);
  // The program ran (segments, live and pending blocks) before vramscope attached.
  for (int op = 0; op < 3'000; ++op) model.random_operation();
  DeviceCounters counters;
  model.attach(sink_into(counters));
  // Events between attach and seed are deltas the seed must account for.
  for (int op = 0; op < 50; ++op) model.random_operation();
  ASSERT_TRUE(counters.seed(seed_from(model)));
  expect_matches(counters, model, -1);
  for (int op = 0; op < 20'000; ++op) {
    model.random_operation();
    const CounterSeed truth = model.stats();
    ASSERT_EQ(counters.reserved_bytes(), truth.reserved_bytes) << op;
    ASSERT_EQ(counters.requested_bytes(), truth.requested_bytes) << op;
    const EventPeaks global = counters.peaks(PeakMark::Global);
    ASSERT_EQ(global.reserved_bytes, truth.peak_reserved_bytes) << op;
    ASSERT_EQ(global.requested_bytes, truth.peak_requested_bytes) << op;
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, CountersVsModel,
                         ::testing::Combine(::testing::Values(1U, 2U, 3U, 42U), ::testing::Bool()));

/// What AgentCore::step() does at a boundary: poll torch (here the model), then close the step.
uint64_t close_step(DeviceCounters& counters, ReferenceAllocator& model) {
  counters.observe_allocated(model.totals().allocated_bytes);
  return counters.restart(PeakMark::Step).allocated_bytes;
}

class AllocatedVsModel : public ::testing::TestWithParam<std::tuple<uint64_t, ReferenceSettings>> {
};

TEST_P(AllocatedVsModel, EveryStepPeakIsTorchsAllocatedPeak) {
  const auto& [seed, settings] = GetParam();
  ReferenceAllocator model(seed, settings);
  for (int op = 0; op < 500; ++op) model.random_operation();  // a program already running
  DeviceCounters counters;
  counters.set_totals_probe(&ReferenceAllocator::probe, &model);
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  static_cast<void>(close_step(counters, model));
  static_cast<void>(model.take_interval_peak_allocated());
  std::mt19937_64 boundaries(seed);
  int steps = 0;
  for (int op = 0; op < 20'000; ++op) {
    model.random_operation();
    if (boundaries() % 23 != 0) continue;
    ++steps;
    ASSERT_EQ(close_step(counters, model), model.take_interval_peak_allocated())
        << "step " << steps;
    ASSERT_EQ(counters.peaks(PeakMark::Global).allocated_bytes, model.stats().peak_allocated_bytes)
        << "step " << steps;
  }
  EXPECT_GT(steps, 500);
  // The stream did exercise what events cannot show: large blocks that kept a remainder.
  if (!settings.expandable) {
    EXPECT_GT(model.unsplit_large_allocations(), 20U);
  }
  EXPECT_EQ(counters.allocated_mismatch_count(), 0U);
  EXPECT_EQ(counters.unsettled_count(), 0U);
  EXPECT_FALSE(counters.reads_every_block());
}

ReferenceSettings with(bool expandable, uint64_t max_split_size_bytes) {
  ReferenceSettings s;
  s.expandable = expandable;
  s.max_split_size_bytes = max_split_size_bytes;
  return s;
}

/// "seed7_expandable": the test names say which stream and which settings.
std::string stream_name(const ::testing::TestParamInfo<AllocatedVsModel::ParamType>& info) {
  const uint64_t seed = std::get<0>(info.param);
  const ReferenceSettings& settings = std::get<1>(info.param);
  return "seed" + std::to_string(seed) + (settings.expandable ? "_expandable" : "") +
         (settings.max_split_size_bytes != UINT64_MAX ? "_max_split_24MiB" : "");
}

INSTANTIATE_TEST_SUITE_P(Pools, AllocatedVsModel,
                         ::testing::Combine(::testing::Values(1U, 7U, 99U),
                                            ::testing::Values(with(false, UINT64_MAX),
                                                              with(true, UINT64_MAX),
                                                              with(false, uint64_t{24} << 20U))),
                         stream_name);

TEST(DeviceCounters, SmallBlocksAreArithmeticAndNeverReadTorch) {
  ReferenceSettings small_only;
  small_only.max_request_bytes = 0;  // random_request() then stays at or below 1 MiB + 1
  ReferenceAllocator model(3, small_only);
  DeviceCounters counters;
  static int reads = 0;
  reads = 0;
  counters.set_totals_probe(
      [](void* context, AllocatorTotals* out) noexcept {
        ++reads;
        return ReferenceAllocator::probe(context, out);
      },
      &model);
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  for (int i = 0; i < 200; ++i) {
    const uint64_t a = model.allocate_bytes(1 + static_cast<uint64_t>(i) * 4099 % (1U << 20U));
    if (i % 3 == 0) model.free_address(a);
  }
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(counters.allocated_bytes(), model.stats().allocated_bytes);
  EXPECT_EQ(counters.peaks(PeakMark::Global).allocated_bytes, model.stats().peak_allocated_bytes);
}

TEST(DeviceCounters, ALargeBlocksRemainderCountsFromItsAllocation) {
  // A 20 MiB segment, then a request that leaves 1 MiB -- too little to split off in the large
  // pool: torch hands out the whole 20 MiB and no event says so.
  ReferenceAllocator model(4, false);
  DeviceCounters counters;
  counters.set_totals_probe(&ReferenceAllocator::probe, &model);
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  const uint64_t big = model.allocate_bytes((uint64_t{19} << 20U) - 100);
  ASSERT_EQ(model.unsplit_large_allocations(), 1U);
  model.free_address(big);  // the next event: a FREE_REQUESTED of that very block
  EXPECT_EQ(counters.peaks(PeakMark::Global).allocated_bytes, uint64_t{20} << 20U);
  EXPECT_EQ(counters.allocated_bytes(), 0U);
  EXPECT_EQ(counters.restart(PeakMark::Step).allocated_bytes, uint64_t{20} << 20U);
}

TEST(DeviceCounters, SeedingWhileALargeAllocationIsPendingStaysExact) {
  // The tracker is attached, a large allocation arrives, and the program goes idle: seeding
  // happens while that allocation's block size is still unknown to the counters.
  ReferenceAllocator model(10, false);
  DeviceCounters counters;
  counters.set_totals_probe(&ReferenceAllocator::probe, &model);
  model.attach(sink_into(counters));
  const uint64_t big = model.allocate_bytes((uint64_t{19} << 20U) - 100);
  ASSERT_TRUE(counters.seed(seed_from(model)));
  EXPECT_EQ(counters.allocated_bytes(), model.stats().allocated_bytes);
  static_cast<void>(model.take_interval_peak_allocated());
  model.free_address(big);
  for (int op = 0; op < 3'000; ++op) {
    model.random_operation();
    if (op % 11 == 0) {
      ASSERT_EQ(close_step(counters, model), model.take_interval_peak_allocated()) << op;
    }
  }
  EXPECT_EQ(counters.allocated_mismatch_count(), 0U);
}

TEST(DeviceCounters, ARoundingTorchAppliesButTheArithmeticMissesIsCaughtThenRead) {
  ReferenceSettings power2;
  power2.power2_divisions = 4;
  ReferenceAllocator model(5, power2);
  DeviceCounters counters;
  counters.set_totals_probe(&ReferenceAllocator::probe, &model);
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  // Small blocks first (rounded to power-of-two divisions by torch), then a large one: its
  // reading shows the arithmetic was wrong.
  for (int i = 0; i < 10; ++i) model.allocate_bytes(5000 + static_cast<uint64_t>(i) * 777);
  model.allocate_bytes(uint64_t{3} << 20U);
  EXPECT_EQ(counters.allocated_mismatch_count(), 1U);
  EXPECT_TRUE(counters.reads_every_block());
  static_cast<void>(close_step(counters, model));
  static_cast<void>(model.take_interval_peak_allocated());
  for (int op = 0; op < 5'000; ++op) {
    model.random_operation();
    if (op % 17 == 0) {
      ASSERT_EQ(close_step(counters, model), model.take_interval_peak_allocated()) << op;
    }
  }
  EXPECT_EQ(counters.allocated_mismatch_count(), 1U);
}

TEST(DeviceCounters, WithoutAReadingLargeBlocksAreALowerBoundAndCounted) {
  ReferenceAllocator model(6, false);
  DeviceCounters counters;  // no probe
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  const uint64_t big = model.allocate_bytes((uint64_t{19} << 20U) - 100);
  model.free_address(big);
  EXPECT_EQ(counters.peaks(PeakMark::Global).allocated_bytes, uint64_t{19} << 20U);
  EXPECT_EQ(counters.unsettled_count(), 1U);
}

TEST(DeviceCounters, TheUsersPeakResetsChangeNothing) {
  ReferenceAllocator model(8, false);
  DeviceCounters counters;
  counters.set_totals_probe(&ReferenceAllocator::probe, &model);
  model.attach(sink_into(counters));
  ASSERT_TRUE(counters.seed(seed_from(model)));
  static_cast<void>(model.take_interval_peak_allocated());
  for (int op = 0; op < 5'000; ++op) {
    model.random_operation();
    if (op % 5 == 0) model.reset_peaks();  // torch.cuda.reset_peak_memory_stats() in the loop
    if (op % 13 == 0) {
      ASSERT_EQ(close_step(counters, model), model.take_interval_peak_allocated()) << op;
    }
  }
}

TEST(DeviceCounters, SeedRetriesWhileEventsSlipIn) {
  ReferenceAllocator model(9, false);
  for (int op = 0; op < 500; ++op) model.random_operation();
  DeviceCounters counters;
  model.attach(sink_into(counters));
  int calls = 0;
  // The first two reads race with an allocation completing on another thread (emulated by
  // running it just before torch's numbers are read): those reads must be discarded.
  const bool ok = counters.seed([&]() -> std::optional<CounterSeed> {
    if (++calls <= 2) model.allocate_locked();
    return model.stats();
  });
  ASSERT_TRUE(ok);
  EXPECT_EQ(calls, 3);
  expect_matches(counters, model, -1);
}

TEST(DeviceCounters, SeedGivesUpWhenEventsNeverPause) {
  ReferenceAllocator model(5, false);
  DeviceCounters counters;
  model.attach(sink_into(counters));
  EXPECT_FALSE(counters.seed(
      [&]() -> std::optional<CounterSeed> {
        model.emit_locked(Action::Alloc, 1);
        return model.stats();
      },
      10));
  EXPECT_FALSE(counters.seeded());
  EXPECT_FALSE(counters.seed([]() -> std::optional<CounterSeed> { return std::nullopt; }));
}

TEST(DeviceCounters, UnderflowClampsAtZeroAndCountsAnomalies) {
  DeviceCounters counters;
  ASSERT_TRUE(counters.seed([]() -> std::optional<CounterSeed> { return CounterSeed{}; }));
  counters.on_event(Action::SegmentFree, 4096);
  EXPECT_EQ(counters.reserved_bytes(), 0U);
  EXPECT_EQ(counters.anomaly_count(), 1U);
  // A FREE_COMPLETED whose ALLOC and FREE_REQUESTED we never saw: both counters clamp.
  counters.on_event(Action::FreeCompleted, 100);
  EXPECT_EQ(counters.requested_bytes(), 0U);
  EXPECT_EQ(counters.pending_free_bytes(), 0U);
  EXPECT_EQ(counters.anomaly_count(), 3U);
  // Afterwards the arithmetic starts again from zero, not from a negative balance.
  counters.on_event(Action::SegmentAlloc, 2048);
  counters.on_event(Action::Alloc, 10);
  EXPECT_EQ(counters.reserved_bytes(), 2048U);
  EXPECT_EQ(counters.requested_bytes(), 10U);
}

TEST(DeviceCounters, PendingFreeLastsUntilCompletion) {
  DeviceCounters counters;
  ASSERT_TRUE(counters.seed([]() -> std::optional<CounterSeed> { return CounterSeed{}; }));
  counters.on_event(Action::Alloc, 1000);
  counters.on_event(Action::FreeRequested, 1000);
  EXPECT_EQ(counters.pending_free_bytes(), 1000U);
  EXPECT_EQ(counters.requested_bytes(),
            requested_release_action == Action::FreeCompleted ? 1000U : 0U);
  counters.on_event(Action::FreeCompleted, 1000);
  EXPECT_EQ(counters.pending_free_bytes(), 0U);
  EXPECT_EQ(counters.requested_bytes(), 0U);
}

TEST(DeviceCounters, StepAndWindowPeaksAreExactAndIndependent) {
  DeviceCounters counters;
  ASSERT_TRUE(counters.seed([]() -> std::optional<CounterSeed> {
    return CounterSeed{1000, 5000, 100, 900};
  }));
  // Global starts at torch's peak; step and window at the current values.
  EXPECT_EQ(counters.peaks(PeakMark::Global).reserved_bytes, 5000U);
  EXPECT_EQ(counters.peaks(PeakMark::Global).requested_bytes, 900U);
  EXPECT_EQ(counters.peaks(PeakMark::Step).reserved_bytes, 1000U);
  EXPECT_EQ(counters.peaks(PeakMark::Window).requested_bytes, 100U);

  counters.on_event(Action::Alloc, 400);  // requested 500
  counters.on_event(Action::FreeRequested, 400);
  counters.on_event(Action::FreeCompleted, 400);  // requested 100
  counters.on_event(Action::SegmentAlloc, 3000);  // reserved 4000
  counters.on_event(Action::SegmentFree, 3000);   // reserved 1000
  const EventPeaks step1 = counters.restart(PeakMark::Step);
  EXPECT_EQ(step1.requested_bytes, 500U);
  EXPECT_EQ(step1.reserved_bytes, 4000U);
  EXPECT_EQ(counters.peaks(PeakMark::Step).requested_bytes, 100U) << "restarts at current";

  counters.on_event(Action::Alloc, 50);
  const EventPeaks step2 = counters.restart(PeakMark::Step);
  EXPECT_EQ(step2.requested_bytes, 150U);
  EXPECT_EQ(step2.reserved_bytes, 1000U);
  // The window mark was never restarted: it saw everything since seeding.
  EXPECT_EQ(counters.peaks(PeakMark::Window).requested_bytes, 500U);
  EXPECT_EQ(counters.peaks(PeakMark::Window).reserved_bytes, 4000U);
  // Restarting the global mark forgets torch's old peak.
  counters.restart(PeakMark::Global);
  EXPECT_EQ(counters.peaks(PeakMark::Global).reserved_bytes, 1000U);
  EXPECT_EQ(counters.peaks(PeakMark::Global).requested_bytes, 150U);
}

TEST(DeviceCounters, CountsEveryEventAndTheUnknownOnes) {
  DeviceCounters counters;
  for (int raw = 0; raw <= 12; ++raw) counters.on_event(action_from_raw(raw), 0);
  counters.on_event(action_from_raw(-1), 0);
  EXPECT_EQ(counters.unknown_event_count(), 5U) << "raw 9-12 and -1";
  for (int raw = 0; raw <= 8; ++raw) EXPECT_NE(action_from_raw(raw), Action::Unknown) << raw;
  EXPECT_EQ(counters.total_event_count(), 14U);
  EXPECT_EQ(action_name(Action::SegmentMap), "segment_map");
}

TEST(DeviceCounters, PollingModeFollowsTorchAndItsPeaks) {
  DeviceCounters counters;
  counters.set_polled({1000, 8000, 0, 0});
  EXPECT_EQ(counters.reserved_bytes(), 1000U);
  EXPECT_EQ(counters.peaks(PeakMark::Global).reserved_bytes, 8000U);
  EXPECT_EQ(counters.peaks(PeakMark::Step).reserved_bytes, 1000U);
  counters.set_polled({2000, 8000, 0, 0});
  EXPECT_EQ(counters.peaks(PeakMark::Step).reserved_bytes, 2000U);
  // torch's peak moved: a high of 9000 happened between polls.
  counters.set_polled({1500, 9000, 0, 0});
  EXPECT_EQ(counters.peaks(PeakMark::Step).reserved_bytes, 9000U);
  EXPECT_EQ(counters.reserved_bytes(), 1500U);
}

}  // namespace
}  // namespace vramscope::tracking
