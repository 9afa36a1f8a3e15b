// src/attribution/fragmentation.hpp -- the caching allocator's segments, and how fragmented they are
//
// Filled from c10's snapshot() (without traces: ~0.2 ms, allowed in the OOM observer) by the
// agent; everything here is torch-free so that the math is tested with synthetic segments.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace vramscope::attribution {

/// State of one block, spelled as memory_viz does.
enum class BlockState : uint8_t { ActiveAllocated = 0, ActivePendingFree = 1, Inactive = 2 };

/// "active_allocated", "active_pending_free" or "inactive".
std::string_view block_state_name(BlockState state);

/// One block of a segment (blocks are contiguous from the segment's address).
struct BlockView {
  uint64_t size_bytes = 0;
  uint64_t requested_bytes = 0;
  BlockState state = BlockState::Inactive;
};

/// One segment (cudaMalloc'ed or mapped range) of the caching allocator.
struct SegmentView {
  int32_t device = 0;
  uint64_t address = 0;
  uint64_t total_bytes = 0;
  uint64_t requested_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint64_t active_bytes = 0;
  uint64_t stream = 0;
  /// Large pool (blocks > 1 MiB) rather than small?
  bool is_large = false;
  bool is_expandable = false;
  std::vector<BlockView> blocks;
};

/// Free memory inside the cache, and how usable it is for one big request.
struct Fragmentation {
  /// Bytes in inactive blocks (reserved by the cache but not allocated).
  uint64_t cached_free_bytes = 0;
  /// The largest inactive block: the biggest request the cache can serve without new memory.
  uint64_t largest_free_block_bytes = 0;
  uint64_t free_block_count = 0;
  uint64_t segment_count = 0;
  /// 1 - largest / cached_free (0 when nothing is free): near 1 means the free memory is in
  /// many small pieces.
  double fragmentation = 0.0;
};

/// Fragmentation of `segments` (of every device given; filter first for one device).
Fragmentation measure_fragmentation(const std::vector<SegmentView>& segments);

}  // namespace vramscope::attribution
