// tests/cpp/attribution/test_session.cpp -- the attribution policy: one profile, counted holds, the stream, step categories
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "vramscope/attribution/session.hpp"

namespace vramscope::attribution {
namespace {

using tracking::Action;
using tracking::AgentConfig;
using tracking::AgentCore;

/// torch's RecordFunction as the session sees it: what was switched, in order.
struct SwitchLog final : OpSwitch {
  std::vector<std::string> calls;
  void enable(double sampling) override { calls.push_back("enable " + std::to_string(sampling)); }
  void disable() override { calls.emplace_back("disable"); }
};

AgentCore make_core(std::size_t devices) {
  AgentConfig config;
  config.ring_capacity = 1024;
  config.history_events = 16;
  std::vector<std::string> uuids;
  for (std::size_t d = 0; d < devices; ++d) uuids.push_back("GPU-" + std::to_string(d));
  return AgentCore(
      uuids, [](std::size_t) { return std::optional<tracking::TorchStats>(); }, config, nullptr);
}

bool streaming(AgentCore& core, std::size_t device) {
  return core.producers()[device].streaming.load();
}
bool op_tracking(AgentCore& core, std::size_t device) {
  return core.producers()[device].op_tracking.load();
}

TEST(AttributionSession, OneProfileAtATime) {
  AgentCore core = make_core(2);
  SwitchLog ops;
  AttributionSession session(core, ops);
  EXPECT_FALSE(streaming(core, 0));
  session.start_profile(0.5);
  EXPECT_TRUE(session.profiling());
  EXPECT_TRUE(session.active());
  for (std::size_t d = 0; d < 2; ++d) {
    EXPECT_TRUE(streaming(core, d)) << d;
    EXPECT_TRUE(op_tracking(core, d)) << d;
  }
  EXPECT_THROW(session.start_profile(1.0), std::runtime_error);
  session.stop_profile();
  session.stop_profile();  // nothing runs: no second disable
  EXPECT_FALSE(session.profiling());
  EXPECT_FALSE(session.active());
  for (std::size_t d = 0; d < 2; ++d) {
    EXPECT_FALSE(streaming(core, d)) << d;
    EXPECT_FALSE(op_tracking(core, d)) << d;
  }
  EXPECT_EQ(ops.calls, (std::vector<std::string>{"enable " + std::to_string(0.5), "disable"}));
}

TEST(AttributionSession, SamplingOutsideZeroToOneIsRejectedBeforeAnythingStarts) {
  AgentCore core = make_core(1);
  SwitchLog ops;
  AttributionSession session(core, ops);
  for (const double bad : {0.0, -1.0, 1.5, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_THROW(session.start_profile(bad), std::invalid_argument) << bad;
  }
  EXPECT_TRUE(ops.calls.empty());
  EXPECT_FALSE(streaming(core, 0));
  session.start_profile(1.0);  // and a valid one still starts
  EXPECT_TRUE(session.profiling());
}

TEST(AttributionSession, AProfileAndAMonitorShareTheStreamUntilTheLastRelease) {
  AgentCore core = make_core(1);
  SwitchLog ops;
  AttributionSession session(core, ops);
  session.acquire();  // a Monitor with categories
  EXPECT_TRUE(streaming(core, 0));
  session.start_profile(1.0);
  session.stop_profile();
  EXPECT_TRUE(streaming(core, 0)) << "the Monitor still holds the ledgers";
  EXPECT_TRUE(session.active());
  EXPECT_FALSE(op_tracking(core, 0));
  session.release();
  EXPECT_FALSE(streaming(core, 0));
  EXPECT_FALSE(session.active());
  session.release();  // a release without a hold changes nothing
  session.acquire();
  EXPECT_TRUE(streaming(core, 0));
}

TEST(AttributionSession, OpCallsCountFromTheProfilesStart) {
  AgentCore core = make_core(1);
  SwitchLog ops;
  AttributionSession session(core, ops);
  const uint32_t add = session.registry().intern("aten::add");
  for (int i = 0; i < 3; ++i) session.registry().count_call(add);
  session.start_profile(1.0);
  session.registry().count_call(add);
  session.registry().count_call(add);
  const std::vector<uint64_t> calls = session.calls_since_profile_start();
  ASSERT_GT(calls.size(), add);
  EXPECT_EQ(calls[add], 2U);
}

TEST(AttributionSession, EventsReachTheLedgersOnlyWhileHeld) {
  AgentCore core = make_core(1);
  SwitchLog ops;
  AttributionSession session(core, ops);
  core.on_event(0, Action::Alloc, 4096, 0x1000, 1);  // before any hold: counters only
  session.acquire();
  core.on_event(0, Action::Alloc, 8192, 0x2000, 1);
  uint64_t live = 0;
  ASSERT_TRUE(session.with_ledger(0, [&](Ledger& ledger) {
    for (const OpTotals& row : ledger.ops(PeakMark::Step)) live += row.live_bytes;
  }));
  // "(before)" holds the 4096 bytes live at the first hold; the second allocation is seen.
  EXPECT_EQ(live, 4096U + 8192U);
}

TEST(AttributionSession, StepRecordsCarryCategoriesOnlyWhileHeldAndActive) {
  AgentCore core = make_core(1);
  SwitchLog ops;
  AttributionSession session(core, ops);
  session.acquire();
  core.on_event(0, Action::Alloc, 4096, 0x1000, 1);
  EXPECT_FALSE(core.step()[0].category_bytes.has_value()) << "no hold on step categories yet";
  session.hold_step_categories(true);
  core.on_event(0, Action::Alloc, 4096, 0x3000, 1);
  const std::vector<StepRecord> held = core.step();
  ASSERT_TRUE(held[0].category_bytes.has_value());
  uint64_t total = 0;
  for (const uint64_t bytes : *held[0].category_bytes) total += bytes;
  EXPECT_EQ(total, 8192U);
  session.hold_step_categories(false);
  session.hold_step_categories(false);  // a drop without a hold stays at zero holds
  EXPECT_FALSE(core.step()[0].category_bytes.has_value());
  session.hold_step_categories(true);
  session.release();  // held, but the ledgers are no longer active
  EXPECT_FALSE(core.step()[0].category_bytes.has_value());
}

}  // namespace
}  // namespace vramscope::attribution
