// tests/cpp/attribution/test_module_frames.cpp -- forward retention and backward peaks per module
//
// Streams of allocator events interleaved with module window edges, as the agent applies them
// (the rings are drained before each edge), through the Ledger that owns the ModuleFrames.
#include <gtest/gtest.h>

#include <map>

#include "vramscope/attribution/ledger.hpp"

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

// --- live bytes by module: what each module allocated and is still alive, across steps -------

/// live_bytes of every module with a row, by id (absent: no row).
std::map<uint32_t, uint64_t> live(const Ledger& ledger) {
  std::map<uint32_t, uint64_t> out;
  for (const ModuleTotals& r : ledger.modules().rows()) out[r.module_id] = r.live_bytes;
  return out;
}

constexpr uint32_t cache = 5;

TEST(ModuleLive, AModuleKeepingOneBlockPerForwardGrowsByItsSizePerCall) {
  // Sequential(cache, linear0) trained for 5 steps; cache appends a 1536-byte tensor to a list
  // at every forward (and frees a temporary); linear0's activation dies in backward.
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  for (uint64_t step = 0; step < 5; ++step) {
    m.forward_enter(seq);
    m.forward_enter(cache);
    alloc(ledger, 0x9000, 64);                    // a temporary, freed inside
    alloc(ledger, 0x1000 + step * 0x1000, 1536);  // kept in the list
    release(ledger, 0x9000, 64);
    m.forward_exit(cache);
    m.forward_enter(linear0);
    alloc(ledger, 0x8000, 4096);  // saved for backward
    m.forward_exit(linear0);
    m.forward_exit(seq);
    EXPECT_EQ(m.live_bytes(linear0), 4096U) << "step " << step;
    release(ledger, 0x8000, 4096);  // backward, after the forward returned
    alloc(ledger, 0xA000, 256);     // a gradient: outside any forward
    release(ledger, 0xA000, 256);
    EXPECT_EQ(m.live_bytes(cache), (step + 1) * 1536) << "step " << step;
    EXPECT_EQ(m.live_bytes(linear0), 0U) << "step " << step;
    EXPECT_EQ(m.live_bytes(seq), 0U) << "step " << step;
  }
  const auto l = live(ledger);
  EXPECT_EQ(l.at(cache), 5U * 1536U);
  EXPECT_EQ(l.at(linear0), 0U);
  EXPECT_EQ(ledger.live_bytes(), 5U * 1536U);
}

TEST(ModuleLive, AFreeInALaterStepUnchargesTheModuleThatAllocated) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(linear0);
  alloc(ledger, 0x100, 1000);
  m.forward_exit(linear0);
  m.forward_enter(linear2);  // a later forward of another module frees it, reuses the address
  alloc(ledger, 0x200, 30);
  release(ledger, 0x100, 1000);
  EXPECT_EQ(m.live_bytes(linear0), 0U);
  EXPECT_EQ(m.live_bytes(linear2), 30U);
  alloc(ledger, 0x100, 700);
  m.forward_exit(linear2);
  EXPECT_EQ(m.live_bytes(linear0), 0U);
  EXPECT_EQ(m.live_bytes(linear2), 730U);
  release(ledger, 0x100, 700);  // outside any forward
  EXPECT_EQ(m.live_bytes(linear2), 30U);
  // A free whose event was dropped: the address allocated again (outside forwards) ends the
  // old block, and its module is uncharged.
  alloc(ledger, 0x200, 5);
  EXPECT_EQ(m.live_bytes(linear2), 0U);
}

TEST(ModuleLive, NestedModulesChargeOnlyTheInnermost) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(seq);
  alloc(ledger, 0x100, 10);  // seq itself
  m.forward_enter(linear0);
  alloc(ledger, 0x200, 200);
  m.forward_enter(act);  // a grandchild
  alloc(ledger, 0x300, 3000);
  m.forward_exit(act);
  m.forward_exit(linear0);
  alloc(ledger, 0x400, 40000);  // seq again, after its child returned
  m.forward_exit(seq);
  const auto l = live(ledger);
  EXPECT_EQ(l.at(seq), 40010U);
  EXPECT_EQ(l.at(linear0), 200U);
  EXPECT_EQ(l.at(act), 3000U);
  // Unlike retention, which rolls children up into parents.
  EXPECT_EQ(rows(ledger).at(seq).retained_bytes, 43210U);
}

TEST(ModuleLive, AllocationsOutsideForwardsAreNobodys) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  alloc(ledger, 0x100, 100);  // before any forward
  m.forward_enter(seq);
  m.forward_exit(seq);
  alloc(ledger, 0x200, 200);  // after it
  ledger.backward_enter(seq);
  m.forward_enter(linear0);  // recomputation inside backward: not a forward frame
  alloc(ledger, 0x300, 300);
  m.forward_exit(linear0);
  m.backward_exit(seq, true);
  EXPECT_EQ(ledger.live_bytes(), 600U);
  for (const auto& [id, bytes] : live(ledger)) EXPECT_EQ(bytes, 0U) << id;
  EXPECT_EQ(m.live_bytes(linear0), 0U);
  EXPECT_EQ(m.live_bytes(0), 0U);
}

TEST(ModuleLive, AFreeOfAnUnknownAddressChangesNothing) {
  Ledger ledger(0);
  ModuleFrames& m = ledger.modules();
  m.forward_enter(cache);
  alloc(ledger, 0x100, 1000);
  release(ledger, 0x999, 1000);  // never seen allocated (live before the ledger started)
  m.forward_exit(cache);
  release(ledger, 0x998, 1000);
  EXPECT_EQ(m.live_bytes(cache), 1000U);
  EXPECT_EQ(ledger.untracked_free_count(), 2U);
  // Retagging a block's category does not move its module bytes.
  EXPECT_TRUE(ledger.tag(0x100, 1000, Category::Parameters));
  EXPECT_EQ(m.live_bytes(cache), 1000U);
  release(ledger, 0x100, 1000);
  EXPECT_EQ(m.live_bytes(cache), 0U);
  // Still a row: it has a forward call.
  EXPECT_EQ(live(ledger).at(cache), 0U);
}

}  // namespace
}  // namespace vramscope::attribution
