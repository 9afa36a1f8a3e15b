// src/attribution/fragmentation.cpp -- free-block statistics over snapshot segments
#include "attribution/fragmentation.hpp"

#include <algorithm>

namespace vramscope::attribution {

std::string_view block_state_name(BlockState state) {
  switch (state) {
    case BlockState::ActiveAllocated: return "active_allocated";
    case BlockState::ActivePendingFree: return "active_pending_free";
    case BlockState::Inactive: return "inactive";
  }
  return "inactive";
}

Fragmentation measure_fragmentation(const std::vector<SegmentView>& segments) {
  Fragmentation out;
  out.segment_count = segments.size();
  for (const SegmentView& segment : segments) {
    for (const BlockView& block : segment.blocks) {
      if (block.state != BlockState::Inactive) continue;
      out.cached_free_bytes += block.size_bytes;
      out.largest_free_block_bytes = std::max(out.largest_free_block_bytes, block.size_bytes);
      ++out.free_block_count;
    }
  }
  if (out.cached_free_bytes > 0) {
    out.fragmentation = 1.0 - static_cast<double>(out.largest_free_block_bytes) /
                                  static_cast<double>(out.cached_free_bytes);
  }
  return out;
}

}  // namespace vramscope::attribution
