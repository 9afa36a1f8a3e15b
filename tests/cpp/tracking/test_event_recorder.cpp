// tests/cpp/tracking/test_event_recorder.cpp -- the producer-owned recorder: order, overwrite,
// every field kept, and snapshots taken while a producer writes
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "vramscope/tracking/event_recorder.hpp"

namespace vramscope::tracking {
namespace {

/// Event number n, with every field derived from n so that a torn copy cannot pass for a whole
/// event.
Event numbered(uint64_t n) {
  return Event{n,
               ~n,
               static_cast<int64_t>(n * 3),
               static_cast<Action>(n % 6),
               static_cast<uint8_t>(n * 7),
               static_cast<uint8_t>(n * 11),
               static_cast<uint32_t>(n * 13)};
}

void expect_numbered(const Event& e, uint64_t n) {
  const Event want = numbered(n);
  EXPECT_EQ(e.size_bytes, want.size_bytes);
  EXPECT_EQ(e.address, want.address) << n;
  EXPECT_EQ(e.timestamp_ns, want.timestamp_ns) << n;
  EXPECT_EQ(e.action, want.action) << n;
  EXPECT_EQ(e.raw_action, want.raw_action) << n;
  EXPECT_EQ(e.phase, want.phase) << n;
  EXPECT_EQ(e.op_id, want.op_id) << n;
}

TEST(EventRecorder, CapacityIsAPowerOfTwo) {
  EXPECT_EQ(EventRecorder(0).capacity(), 2U);
  EXPECT_EQ(EventRecorder(16).capacity(), 16U);
  EXPECT_EQ(EventRecorder(4000).capacity(), 4096U);
}

TEST(EventRecorder, KeepsEveryFieldInOrderUntilItWraps) {
  EventRecorder recorder(16);
  EXPECT_TRUE(recorder.snapshot().empty());
  for (uint64_t n = 0; n < 10; ++n) recorder.record(numbered(n));
  const std::vector<Event> events = recorder.snapshot();
  ASSERT_EQ(events.size(), 10U);
  for (uint64_t n = 0; n < 10; ++n) expect_numbered(events[n], n);
  EXPECT_EQ(recorder.recorded_count(), 10U);
}

TEST(EventRecorder, OverwritesTheOldestAndNeverDrops) {
  EventRecorder recorder(16);
  for (uint64_t n = 0; n < 100; ++n) recorder.record(numbered(n));
  const std::vector<Event> events = recorder.snapshot();
  // One slot is the one the next event goes to, possibly being written: capacity - 1 are kept.
  ASSERT_EQ(events.size(), 15U);
  for (std::size_t i = 0; i < events.size(); ++i) expect_numbered(events[i], 85 + i);
  EXPECT_EQ(recorder.recorded_count(), 100U);
}

TEST(EventRecorder, SnapshotsWhileAProducerWritesHoldOnlyWholeConsecutiveEvents) {
  // A producer laps a small recorder thousands of times while two readers copy it: every copy
  // must be a run of consecutive, untorn events (a torn one would mix fields of two numbers).
  // The producer keeps writing until the readers have taken enough copies, however the
  // threads are scheduled.
  EventRecorder recorder(64);
  constexpr uint64_t min_events = 400'000;
  constexpr uint64_t min_snapshots = 2'000;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> snapshots{0};
  std::atomic<uint64_t> failures{0};
  uint64_t total = 0;
  std::thread producer([&] {
    for (; total < min_events || snapshots.load() < min_snapshots; ++total) {
      recorder.record(numbered(total));
    }
    done.store(true);
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        const std::vector<Event> events = recorder.snapshot();
        snapshots.fetch_add(1);
        for (std::size_t i = 0; i < events.size(); ++i) {
          const uint64_t n = events[0].size_bytes + i;
          const Event want = numbered(n);
          const Event& got = events[i];
          if (got.size_bytes != n || got.address != want.address ||
              got.timestamp_ns != want.timestamp_ns || got.action != want.action ||
              got.raw_action != want.raw_action || got.phase != want.phase ||
              got.op_id != want.op_id) {
            failures.fetch_add(1);
            break;
          }
        }
      }
    });
  }
  producer.join();
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0U) << "of " << snapshots.load() << " snapshots";
  EXPECT_GE(snapshots.load(), min_snapshots);
  const std::vector<Event> last = recorder.snapshot();
  ASSERT_EQ(last.size(), 63U);
  expect_numbered(last.back(), total - 1);
}

}  // namespace
}  // namespace vramscope::tracking
