// tests/cpp/tracking/test_device_counters.cpp -- event counters against a reference allocator
#include <gtest/gtest.h>

#include "tracking/device_counters.hpp"
#include "tracking/reference_allocator.hpp"

namespace vramscope::tracking {
namespace {

using testing::ReferenceAllocator;

ReferenceAllocator::Sink sink_into(DeviceCounters& counters) {
  return [&counters](Action action, uint64_t size, uint8_t) { counters.on_event(action, size); };
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
                         ::testing::Combine(::testing::Values(1U, 2U, 3U, 42U),
                                            ::testing::Bool()));

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
