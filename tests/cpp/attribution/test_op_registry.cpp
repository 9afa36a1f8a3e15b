// tests/cpp/attribution/test_op_registry.cpp -- interning across threads and the per-thread op stack
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <thread>
#include <vector>

#include "vramscope/attribution/attributor.hpp"
#include "vramscope/attribution/op_registry.hpp"
#include "vramscope/tracking/device_producer.hpp"

namespace vramscope::attribution {
namespace {

TEST(OpRegistry, InternsOnceAcrossThreadsAndCountsCalls) {
  OpRegistry registry;
  std::vector<std::vector<uint32_t>> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        const uint32_t id = registry.intern(i % 2 == 0 ? "aten::mm" : std::string("aten::add"));
        registry.count_call(id);
        if (i < 2) seen[t].push_back(id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& ids : seen) EXPECT_EQ(ids, seen[0]);
  EXPECT_EQ(registry.size(), 4U);  // two pseudo-ops and two names
  EXPECT_EQ(registry.name(seen[0][0]), "aten::mm");
  EXPECT_EQ(registry.name(no_op_id), "(no op)");
  EXPECT_EQ(registry.call_counts()[seen[0][0]], 2000U);
}

TEST(OpRegistry, AFullRegistryAnswersNoOp) {
  OpRegistry registry(3);
  EXPECT_EQ(registry.intern("a"), first_named_op_id);
  EXPECT_EQ(registry.intern("b"), no_op_id);
  EXPECT_EQ(registry.intern("a"), first_named_op_id);
}

TEST(OpStack, NestsPerThreadAndToleratesUnmatchedEnds) {
  int outer = 0, inner = 0, stray = 0;
  EXPECT_EQ(current_op(), no_op_id);
  push_op(&outer, 5);
  push_op(&inner, 6);
  EXPECT_EQ(current_op(), 6U);
  std::thread other([] { EXPECT_EQ(current_op(), no_op_id); });  // autograd threads start empty
  other.join();
  pop_op(&stray);  // an end whose start we never saw
  EXPECT_EQ(current_op(), 6U);
  pop_op(&outer);  // inner's end never came: both go
  EXPECT_EQ(current_op(), no_op_id);
}

TEST(OpStack, EventsCarryTheOpOnlyWhileOpsAreTracked) {
  // Outside a profile() the stack is not maintained: a scope open when the callback was
  // disabled stays on it, and must not be stamped on later allocations. The tracker stamps
  // through the device's producer, as agent/torchlib/torch_library.cpp does.
  int scope = 0;
  push_op(&scope, 9);
  ASSERT_EQ(current_op(), 9U);
  tracking::DeviceProducer producer(64, 64);
  const auto innermost = [] { return current_op(); };
  producer.on_tracker_event(tracking::Action::Alloc, 512, 0x1000, 1, innermost);
  producer.op_tracking.store(true);
  producer.phase.store(2);
  producer.on_tracker_event(tracking::Action::Alloc, 512, 0x2000, 1, innermost);
  std::thread other([&] {  // its own, empty stack
    producer.on_tracker_event(tracking::Action::Alloc, 512, 0x3000, 1, innermost);
  });
  other.join();
  producer.op_tracking.store(false);
  pop_op(&scope);
  EXPECT_EQ(current_op(), no_op_id);
  const std::vector<tracking::Event> events = producer.recorder.snapshot();
  ASSERT_EQ(events.size(), 3U);
  EXPECT_EQ(events[0].op_id, no_op_id) << "stale scope stamped outside a profile";
  EXPECT_EQ(events[0].phase, 0U);
  EXPECT_EQ(events[1].op_id, 9U);
  EXPECT_EQ(events[1].phase, 2U);
  EXPECT_EQ(events[2].op_id, no_op_id);
}

TEST(OpStack, SurvivesNestingDeeperThanItsCapacity) {
  std::vector<int> keys(100);
  for (int i = 0; i < 100; ++i) push_op(&keys[i], static_cast<uint32_t>(10 + i));
  for (int i = 99; i >= 0; --i) pop_op(&keys[i]);
  EXPECT_EQ(current_op(), no_op_id);
}

TEST(Attributor, ConsumesOnlyWhileHeldAndStartsFreshLedgers) {
  Attributor attributor(2);
  tracking::Event e;
  e.action = tracking::Action::Alloc;
  e.address = 1;
  e.size_bytes = 10;
  e.op_id = 7;
  attributor.consume(0, {e});
  EXPECT_FALSE(attributor.has_ledgers());
  EXPECT_TRUE(attributor.acquire({100, 200}));
  EXPECT_FALSE(attributor.acquire({}));  // a second holder shares the ledgers
  attributor.consume(1, {e});
  uint64_t live = 0;
  EXPECT_TRUE(attributor.with_ledger(1, [&](Ledger& l) { live = l.live_bytes(); }));
  EXPECT_EQ(live, 210U);
  EXPECT_TRUE(attributor.release());
  EXPECT_TRUE(attributor.active());
  EXPECT_TRUE(attributor.release());
  EXPECT_FALSE(attributor.release());
  attributor.consume(1, {e});
  attributor.with_ledger(1, [&](Ledger& l) { live = l.live_bytes(); });
  EXPECT_EQ(live, 210U);  // readable after the last release, but no longer fed
}

}  // namespace
}  // namespace vramscope::attribution
