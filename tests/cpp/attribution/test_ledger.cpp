// tests/cpp/attribution/test_ledger.cpp -- per-op and per-category attribution from synthetic streams
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "vramscope/attribution/ledger.hpp"

namespace vramscope::attribution {
namespace {

using tracking::Action;
using tracking::Event;

Event alloc(uint64_t address, uint64_t size, uint32_t op, Phase phase = Phase::Other) {
  Event e;
  e.action = Action::Alloc;
  e.address = address;
  e.size_bytes = size;
  e.op_id = op;
  e.phase = static_cast<uint8_t>(phase);
  return e;
}

/// FREE_REQUESTED on the freeing thread (op `op`), then FREE_COMPLETED.
void free_block(Ledger& ledger, uint64_t address, uint64_t size, uint32_t op) {
  Event e;
  e.action = Action::FreeRequested;
  e.address = address;
  e.size_bytes = size;
  e.op_id = op;
  ledger.on_event(e);
  e.action = Action::FreeCompleted;
  e.op_id = 0;  // deferred completions come from whatever thread polls the CUDA events
  ledger.on_event(e);
}

std::map<uint32_t, OpTotals> by_id(const std::vector<OpTotals>& rows) {
  std::map<uint32_t, OpTotals> out;
  for (const OpTotals& r : rows) out[r.op_id] = r;
  return out;
}

constexpr uint32_t linear = 2, relu = 3, mm = 4;

TEST(Ledger, ChargesAllocationsToTheOpAndMatchesFreesByAddress) {
  Ledger ledger(1000);
  ledger.on_event(alloc(0x100, 300, linear));
  ledger.on_event(alloc(0x200, 50, relu));
  free_block(ledger, 0x100, 300, relu);  // freed while relu runs, allocated by linear
  const auto ops = by_id(ledger.ops(PeakMark::Profile));
  EXPECT_EQ(ops.at(linear).alloc_count, 1U);
  EXPECT_EQ(ops.at(linear).allocated_bytes, 300U);
  EXPECT_EQ(ops.at(linear).live_bytes, 0U);
  EXPECT_EQ(ops.at(linear).self_freed_bytes, 0U);
  EXPECT_EQ(ops.at(relu).live_bytes, 50U);
  EXPECT_EQ(ops.at(relu).self_freed_bytes, 300U);
  EXPECT_EQ(ops.at(before_op_id).live_bytes, 1000U);
  EXPECT_EQ(ledger.live_bytes(), 1050U);
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Profile), 1350U);
}

TEST(Ledger, LiveAtPeakIsTheBreakdownAtTheMomentOfThePeak) {
  Ledger ledger(0);
  ledger.on_event(alloc(1, 100, linear));
  ledger.on_event(alloc(2, 400, mm));  // peak 500: linear 100, mm 400
  free_block(ledger, 2, 400, mm);
  ledger.on_event(alloc(3, 300, relu));  // 400 < 500: not a new peak
  free_block(ledger, 1, 100, relu);
  auto ops = by_id(ledger.ops(PeakMark::Profile));
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Profile), 500U);
  EXPECT_EQ(ops.at(linear).live_at_peak_bytes, 100U);
  EXPECT_EQ(ops.at(mm).live_at_peak_bytes, 400U);
  EXPECT_EQ(ops[relu].live_at_peak_bytes, 0U);
  // A new, higher peak replaces the breakdown.
  ledger.on_event(alloc(4, 250, mm));  // 300 + 250 = 550
  ops = by_id(ledger.ops(PeakMark::Profile));
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Profile), 550U);
  EXPECT_EQ(ops.at(linear).live_at_peak_bytes, 0U);
  EXPECT_EQ(ops.at(mm).live_at_peak_bytes, 250U);
  EXPECT_EQ(ops.at(relu).live_at_peak_bytes, 300U);
}

TEST(Ledger, MarksRestartIndependently) {
  Ledger ledger(0);
  ledger.on_event(alloc(1, 1000, linear));
  free_block(ledger, 1, 1000, linear);
  ledger.restart_peak(PeakMark::Step);
  ledger.on_event(alloc(2, 10, relu));
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Profile), 1000U);
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Step), 10U);
  EXPECT_EQ(by_id(ledger.ops(PeakMark::Step)).at(relu).live_at_peak_bytes, 10U);
  EXPECT_EQ(by_id(ledger.ops(PeakMark::Step)).at(linear).live_at_peak_bytes, 0U);
  EXPECT_EQ(by_id(ledger.ops(PeakMark::Profile)).at(linear).live_at_peak_bytes, 1000U);
}

TEST(Ledger, FreesOfMemoryFromBeforeComeOutOfTheBeforeBytes) {
  Ledger ledger(100);
  free_block(ledger, 0x999, 60, linear);
  free_block(ledger, 0x998, 60, linear);  // more than there was: clamped, sums stay consistent
  EXPECT_EQ(ledger.untracked_free_count(), 2U);
  EXPECT_EQ(ledger.live_bytes(), 0U);
  EXPECT_EQ(by_id(ledger.ops(PeakMark::Profile)).at(before_op_id).live_bytes, 0U);
}

TEST(Ledger, AnAllocationAtALiveAddressRetiresTheOldOne) {
  Ledger ledger(0);
  ledger.on_event(alloc(7, 100, linear));
  ledger.on_event(alloc(7, 30, relu));  // the free of the first was dropped
  EXPECT_EQ(ledger.live_bytes(), 30U);
  EXPECT_EQ(ledger.tracked_allocations(), 1U);
}

TEST(Ledger, PhasesGiveCategoriesAndTagsMoveThemRetroactivelyAtThePeak) {
  Ledger ledger(800);
  // Parameters predate the ledger: tagging their addresses moves them out of "other".
  EXPECT_TRUE(ledger.tag(0xA0, 500, Category::Parameters));
  ledger.on_event(alloc(1, 200, linear, Phase::Forward));
  ledger.on_event(alloc(2, 100, mm, Phase::Backward));  // a gradient, not yet known as one
  ledger.on_event(alloc(3, 50, mm, Phase::Backward));   // a temporary; peak here: 1150
  free_block(ledger, 3, 50, mm);
  free_block(ledger, 1, 200, mm);
  ledger.on_event(alloc(4, 40, mm, Phase::Optimizer));
  // Step end: the gradient is identified. It was live at the peak, so the peak's breakdown moves.
  EXPECT_TRUE(ledger.tag(2, 0, Category::Gradients));
  EXPECT_TRUE(ledger.tag(4, 0, Category::OptimizerState));
  const auto cats = ledger.categories(PeakMark::Profile);
  auto at = [&](Category c) { return cats[static_cast<std::size_t>(c)]; };
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Profile), 1150U);
  EXPECT_EQ(at(Category::Parameters).live_at_peak_bytes, 500U);
  EXPECT_EQ(at(Category::Other).live_at_peak_bytes, 300U);
  EXPECT_EQ(at(Category::Activations).live_at_peak_bytes, 200U);
  EXPECT_EQ(at(Category::Gradients).live_at_peak_bytes, 100U);
  EXPECT_EQ(at(Category::Temporaries).live_at_peak_bytes, 50U);
  EXPECT_EQ(at(Category::OptimizerState).live_at_peak_bytes, 0U);  // allocated after the peak
  EXPECT_EQ(at(Category::OptimizerState).live_bytes, 40U);
  EXPECT_EQ(at(Category::Gradients).live_bytes, 100U);
  EXPECT_EQ(at(Category::Activations).live_bytes, 0U);
  EXPECT_FALSE(ledger.tag(0xBEEF, 0, Category::Parameters));

  // The same breakdown in export order (parameters, gradients, optimizer state, activations,
  // temporaries, other), as step records carry it.
  const CategoryBytes exported = category_bytes_at_peak(cats);
  EXPECT_EQ(exported, (CategoryBytes{500, 100, 0, 200, 50, 300}));
  for (std::size_t c = 0; c < category_count; ++c) {
    EXPECT_EQ(category_name(static_cast<Category>(c)), memory_category_names[c]);
  }
}

/// Reference: recompute the breakdown from scratch after every event and remember it at the
/// highest total; the ledger's O(1) stamps must agree on a long random stream.
TEST(Ledger, AgreesWithABruteForceReplayOnARandomStream) {
  std::mt19937_64 rng(42);
  Ledger ledger(0);
  std::map<uint64_t, std::pair<uint32_t, uint64_t>> live;  // address -> (op, size)
  uint64_t total = 0, peak = 0;
  std::map<uint32_t, uint64_t> at_peak;
  for (int i = 0; i < 20000; ++i) {
    const bool do_alloc = live.empty() || rng() % 100 < 55;
    if (do_alloc) {
      const uint64_t address = 0x1000 + (rng() % 5000) * 0x100;
      if (live.count(address) != 0) continue;
      const auto op = static_cast<uint32_t>(2 + rng() % 7);
      const uint64_t size = 1 + rng() % 4096;
      ledger.on_event(alloc(address, size, op));
      live[address] = {op, size};
      total += size;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      free_block(ledger, it->first, it->second.second, 3);
      total -= it->second.second;
      live.erase(it);
    }
    if (total > peak) {
      peak = total;
      at_peak.clear();
      for (const auto& [address, entry] : live) at_peak[entry.first] += entry.second;
    }
  }
  EXPECT_EQ(ledger.peak_bytes(PeakMark::Profile), peak);
  EXPECT_EQ(ledger.live_bytes(), total);
  for (const OpTotals& row : ledger.ops(PeakMark::Profile)) {
    EXPECT_EQ(row.live_at_peak_bytes, at_peak[row.op_id]) << "op " << row.op_id;
  }
}

}  // namespace
}  // namespace vramscope::attribution
