// src/attribution/include/vramscope/attribution/segment_view.hpp -- the allocator's segments, as the OOM observer copies them
//
// Filled from c10's snapshot() (without traces: ~0.2 ms, allowed in the OOM observer) by the
// agent; torch-free so that the OOM capture hands plain structs to Python, which judges the
// fragmentation (python/vramscope/_oom_advice.py).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace vramscope::attribution {

/// State of one block, spelled as memory_viz does.
enum class BlockState : uint8_t { ActiveAllocated = 0, ActivePendingFree = 1, Inactive = 2 };

/// "active_allocated", "active_pending_free" or "inactive".
inline std::string_view block_state_name(BlockState state) {
  switch (state) {
    case BlockState::ActiveAllocated:
      return "active_allocated";
    case BlockState::ActivePendingFree:
      return "active_pending_free";
    case BlockState::Inactive:
      return "inactive";
  }
  return "inactive";
}

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

}  // namespace vramscope::attribution
