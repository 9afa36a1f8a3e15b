// src/tracking/events.cpp -- names of allocator actions
#include "vramscope/tracking/events.hpp"

#include <array>

namespace vramscope::tracking {

std::string_view action_name(Action action) {
  static constexpr std::array<std::string_view, action_count> names = {
      "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
      "segment_map", "segment_unmap",  "snapshot",       "oom",           "unknown"};
  const auto index = static_cast<std::size_t>(action);
  return index < names.size() ? names[index] : names.back();
}

}  // namespace vramscope::tracking
