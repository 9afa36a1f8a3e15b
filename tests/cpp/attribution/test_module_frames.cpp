// tests/cpp/attribution/test_module_frames.cpp -- forward retention and backward peaks per module
//
// Streams of allocator events interleaved with module window edges, as the agent applies them
// (the rings are drained before each edge), through the Ledger that owns the ModuleFrames.
#include <gtest/gtest.h>

#include <map>

#include "attribution/ledger.hpp"

namespace vramscope::attribution {
namespace {

using tracking::Action;
using tracking::Event;

void alloc(Ledger& ledger, uint64_t address, uint64_t size) {
  Event e;
  e.action = Action::Alloc;
  e.address = address;
  e.size_bytes = size;
  ledger.on_event(e);
}

void release(Ledger& ledger, uint64_t address, uint64_t size) {
  Event e;
  e.address = address;
  e.size_bytes = size;
  e.action = Action::FreeRequested;
  ledger.on_event(e);
  e.action = Action::FreeCompleted;
  ledger.on_event(e);
}

std::map<uint32_t, ModuleTotals> rows(const Ledger& ledger) {
  std::map<uint32_t, ModuleTotals> out;
  for (const ModuleTotals& r : ledger.modules().rows()) out[r.module_id] = r;
  return out;
}

constexpr uint32_t seq = 1, linear0 = 2, act = 3, linear2 = 4;

/// Sequential(Linear, activation, Linear) with activation saving its output (ReLU) or its
/// input (GELU): the input x is allocated before the forward.
std::map<uint32_t, ModuleTotals> mlp_forward(bool activation_saves_input) {
  Ledger ledger(0);
  alloc(ledger, 0x10, 4096);  // x, from before the forward
  ModuleFrames& m = ledger.modules();
  m.forward_enter(seq);
  m.forward_enter(linear0);
  alloc(ledger, 0x100, 2048);  // y0
  m.forward_exit(linear0);
  m.forward_enter(act);
  alloc(ledger, 0x200, 2048);  // y1
  m.forward_exit(act);
  // Sequential drops y0 unless autograd saved it for the activation's backward.
  if (!activation_saves_input) release(ledger, 0x100, 2048);
  m.forward_enter(linear2);
  alloc(ledger, 0x300, 512);  // y2, returned
  m.forward_exit(linear2);
  m.forward_exit(seq);
  EXPECT_EQ(m.forward_depth(), 0U);
  return rows(ledger);
}

TEST(ModuleFrames, ReluSavesItsOutputSoTheFirstLinearRetainsNothing) {
  const auto r = mlp_forward(false);
  EXPECT_EQ(r.at(linear0).retained_bytes, 0U);
  EXPECT_EQ(r.at(act).retained_bytes, 2048U);
  EXPECT_EQ(r.at(linear2).retained_bytes, 512U);
  // The parent includes its children; x predates the forward and is nobody's.
  EXPECT_EQ(r.at(seq).retained_bytes, 2048U + 512U);
  for (const auto& [id, row] : r) EXPECT_EQ(row.forward_calls, 1U) << id;
}

TEST(ModuleFrames, GeluSavesItsInputSoTheFirstLinearRetainsItsOutput) {
  const auto r = mlp_forward(true);
  EXPECT_EQ(r.at(linear0).retained_bytes, 2048U);
  EXPECT_EQ(r.at(act).retained_bytes, 2048U);
  EXPECT_EQ(r.at(seq).retained_bytes, 2048U + 2048U + 512U);
}

TEST(ModuleFrames, FreesAfterTheOuterForwardReturnsDoNotChangeItsRetention) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(seq);
  alloc(ledger, 0x100, 1000);
  alloc(ledger, 0x200, 300);
  release(ledger, 0x200, 300);  // a temporary: freed inside, not retained
  m.forward_exit(seq);
  release(ledger, 0x100, 1000);  // backward frees the activation later
  EXPECT_EQ(rows(ledger).at(seq).retained_bytes, 1000U);
  // A second forward is a second call; the old frame's allocation being freed now and the
  // address reused do not leak into it.
  alloc(ledger, 0x400, 64);
  m.forward_enter(seq);
  release(ledger, 0x400, 64);
  alloc(ledger, 0x100, 100);
  m.forward_exit(seq);
  const auto r = rows(ledger);
  EXPECT_EQ(r.at(seq).forward_calls, 2U);
  EXPECT_EQ(r.at(seq).retained_bytes, 1100U);
  EXPECT_EQ(r.at(seq).max_retained_bytes, 1000U);
}

TEST(ModuleFrames, TheSameModuleTwiceInOneForwardIsTwoCallsWithTheirOwnBytes) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(seq);
  m.forward_enter(linear0);
  alloc(ledger, 0x100, 100);
  m.forward_exit(linear0);
  m.forward_enter(linear0);  // weight sharing: the same module again
  alloc(ledger, 0x200, 300);
  m.forward_exit(linear0);
  release(ledger, 0x100, 100);  // the first call's output is dropped before the end
  m.forward_exit(seq);
  const auto r = rows(ledger);
  EXPECT_EQ(r.at(linear0).forward_calls, 2U);
  EXPECT_EQ(r.at(linear0).retained_bytes, 300U);
  EXPECT_EQ(r.at(linear0).max_retained_bytes, 300U);
  EXPECT_EQ(r.at(seq).retained_bytes, 300U);
}

TEST(ModuleFrames, BackwardAllocationsAreNotChargedToTheForward) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(seq);
  alloc(ledger, 0x100, 100);
  m.forward_exit(seq);
  alloc(ledger, 0x200, 5000);  // a gradient, made in backward
  m.forward_enter(seq);        // the next step's forward
  m.forward_exit(seq);
  const auto r = rows(ledger);
  EXPECT_EQ(r.at(seq).retained_bytes, 100U);
  EXPECT_EQ(ledger.live_bytes(), 5100U);
}

TEST(ModuleFrames, AnExitThatNeverCameIsClosedByItsParentsExit) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(seq);
  m.forward_enter(linear0);
  alloc(ledger, 0x100, 100);
  EXPECT_FALSE(m.forward_exit(act));  // never entered: ignored
  EXPECT_TRUE(m.forward_exit(seq));   // linear0's exit was skipped (an exception)
  EXPECT_EQ(m.forward_depth(), 0U);
  const auto r = rows(ledger);
  EXPECT_EQ(r.at(linear0).retained_bytes, 100U);
  EXPECT_EQ(r.at(seq).retained_bytes, 100U);
}

TEST(ModuleFrames, BackwardPeakIsTheHighestLiveAboveTheWindowStart) {
  Ledger ledger(1000);  // 1000 bytes live before: the peak is relative to the start
  ModuleFrames& m = ledger.modules();
  ledger.backward_enter(seq);
  ledger.backward_enter(linear2);
  alloc(ledger, 0x100, 400);  // grad input
  alloc(ledger, 0x200, 600);  // grad weight: 1000 above the start
  release(ledger, 0x100, 400);
  EXPECT_TRUE(m.backward_exit(linear2, true));
  ledger.backward_enter(linear0);
  alloc(ledger, 0x300, 300);  // 1900 live: 900 above linear0's start of 1600
  EXPECT_TRUE(m.backward_exit(linear0, true));
  EXPECT_TRUE(m.backward_exit(seq, true));
  const auto r = rows(ledger);
  EXPECT_EQ(r.at(linear2).backward_peak_bytes, 1000U);
  EXPECT_EQ(r.at(linear0).backward_peak_bytes, 300U);
  // The parent's peak folds in its children's: 1000 + 600 + 300 = 1900 at most, from 1000.
  EXPECT_EQ(r.at(seq).backward_peak_bytes, 1000U);
  EXPECT_EQ(r.at(seq).backward_calls, 1U);
  EXPECT_EQ(m.backward_depth(), 0U);
}

TEST(ModuleFrames, UnmeasuredAndAbandonedWindowsStillFeedTheirParent) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  ledger.backward_enter(seq);
  ledger.backward_enter(linear2);
  ledger.backward_enter(act);  // its exit never comes
  alloc(ledger, 0x100, 700);
  release(ledger, 0x100, 700);
  EXPECT_TRUE(m.backward_exit(linear2, false));  // closes act too; linear2 not recorded
  EXPECT_FALSE(m.backward_exit(act, true));
  EXPECT_TRUE(m.backward_exit(seq, true));
  const auto r = rows(ledger);
  EXPECT_EQ(r.count(linear2), 0U);
  EXPECT_EQ(r.count(act), 0U);
  EXPECT_EQ(r.at(seq).backward_peak_bytes, 700U);
}

TEST(ModuleFrames, RecomputationInsideBackwardIsNotAForwardCall) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  ledger.backward_enter(seq);
  m.forward_enter(linear0);  // torch.utils.checkpoint re-runs the forward
  alloc(ledger, 0x100, 800);
  EXPECT_EQ(m.current_frame(), no_frame);
  EXPECT_TRUE(m.forward_exit(linear0));
  release(ledger, 0x100, 800);
  m.backward_exit(seq, true);
  const auto r = rows(ledger);
  EXPECT_EQ(r.count(linear0), 0U);
  EXPECT_EQ(r.at(seq).backward_peak_bytes, 800U);
}

}  // namespace
}  // namespace vramscope::attribution
