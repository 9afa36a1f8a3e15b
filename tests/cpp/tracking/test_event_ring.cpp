// tests/cpp/tracking/test_event_ring.cpp -- the callback-to-agent ring: order, overflow, threads
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "vramscope/tracking/event_ring.hpp"

namespace vramscope::tracking {
namespace {

Event numbered(uint64_t n) { return Event{n, n, 0, Action::Alloc, 0}; }

TEST(EventRing, CapacityIsAPowerOfTwo) {
  EXPECT_EQ(EventRing(1).capacity(), 2U);
  EXPECT_EQ(EventRing(8).capacity(), 8U);
  EXPECT_EQ(EventRing(1000).capacity(), 1024U);
}

TEST(EventRing, FullRingDropsAndCountsAndKeepsOrder) {
  EventRing ring(8);
  for (uint64_t n = 0; n < 8; ++n) EXPECT_TRUE(ring.push(numbered(n)));
  EXPECT_FALSE(ring.push(numbered(8)));
  EXPECT_FALSE(ring.push(numbered(9)));
  EXPECT_EQ(ring.dropped_count(), 2U);
  EXPECT_EQ(ring.size(), 8U);

  std::vector<Event> out;
  EXPECT_EQ(ring.drain(out, 3), 3U);
  EXPECT_TRUE(ring.push(numbered(10)));
  EXPECT_EQ(ring.drain(out), 6U);
  ASSERT_EQ(out.size(), 9U);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(out[i].address, i);
  EXPECT_EQ(out[8].address, 10U) << "the dropped events are gone, later ones arrive";
  EXPECT_EQ(ring.size(), 0U);
}

TEST(EventRing, AfterADrainTheProducerSeesTheFreedRoom) {
  // The producer keeps its own copy of the tail and reads the consumer's only when the ring
  // looks full from that copy: a copy left stale by a drain must not cost a single event.
  EventRing ring(8);
  std::vector<Event> out;
  for (uint64_t round = 0; round < 3; ++round) {
    for (uint64_t n = 0; n < 8; ++n) {
      EXPECT_TRUE(ring.push(numbered(round * 8 + n))) << "round " << round << " event " << n;
    }
    EXPECT_EQ(ring.drain(out), 8U);
  }
  EXPECT_EQ(ring.dropped_count(), 0U);
  ASSERT_EQ(out.size(), 24U);
  for (uint64_t i = 0; i < 24; ++i) EXPECT_EQ(out[i].address, i);
}

TEST(EventRing, ConcurrentProducerAndConsumer) {
  // The producer never waits: with a small ring and a busy consumer some events drop, and the
  // consumer sees every other event exactly once, in order.
  EventRing ring(64);
  constexpr uint64_t total = 500'000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint64_t n = 1; n <= total; ++n) ring.push(numbered(n));
    done.store(true, std::memory_order_release);
  });
  std::vector<Event> batch;
  uint64_t received = 0;
  uint64_t last = 0;
  bool in_order = true;
  const auto consume = [&] {
    batch.clear();
    ring.drain(batch);
    for (const Event& e : batch) {
      in_order = in_order && e.address > last;
      last = e.address;
      ++received;
    }
  };
  while (!done.load(std::memory_order_acquire)) consume();
  producer.join();
  consume();
  EXPECT_TRUE(in_order);
  EXPECT_EQ(received + ring.dropped_count(), total);
  EXPECT_GT(received, 0U);
}

}  // namespace
}  // namespace vramscope::tracking
