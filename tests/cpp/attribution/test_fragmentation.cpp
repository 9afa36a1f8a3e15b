// tests/cpp/attribution/test_fragmentation.cpp -- free-block math over synthetic segments
#include <gtest/gtest.h>

#include "attribution/fragmentation.hpp"

namespace vramscope::attribution {
namespace {

SegmentView segment(std::vector<BlockView> blocks) {
  SegmentView s;
  for (const BlockView& b : blocks) s.total_bytes += b.size_bytes;
  s.blocks = std::move(blocks);
  return s;
}

TEST(Fragmentation, CountsOnlyInactiveBlocks) {
  const std::vector<SegmentView> segments = {
      segment({{100, 100, BlockState::ActiveAllocated}, {300, 0, BlockState::Inactive}}),
      segment({{50, 0, BlockState::Inactive}, {50, 50, BlockState::ActivePendingFree},
               {50, 0, BlockState::Inactive}})};
  const Fragmentation f = measure_fragmentation(segments);
  EXPECT_EQ(f.cached_free_bytes, 400U);
  EXPECT_EQ(f.largest_free_block_bytes, 300U);
  EXPECT_EQ(f.free_block_count, 3U);
  EXPECT_EQ(f.segment_count, 2U);
  EXPECT_DOUBLE_EQ(f.fragmentation, 0.25);
}

TEST(Fragmentation, NothingFreeIsNotFragmented) {
  const Fragmentation f = measure_fragmentation({segment({{10, 10, BlockState::ActiveAllocated}})});
  EXPECT_EQ(f.cached_free_bytes, 0U);
  EXPECT_DOUBLE_EQ(f.fragmentation, 0.0);
  EXPECT_EQ(block_state_name(BlockState::ActivePendingFree), "active_pending_free");
}

}  // namespace
}  // namespace vramscope::attribution
