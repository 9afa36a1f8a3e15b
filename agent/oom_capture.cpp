// agent/oom_capture.cpp -- the allocator's segments at an OOM, and the Python post-mortem hook
#include "oom_capture.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <nanobind/stl/string.h>

#include <mutex>
#include <string>

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {
namespace alloc = c10::cuda::CUDACachingAllocator;

/// Blocks captured by the last OOM observer call (host memory, bounded).
std::mutex g_oom_mutex;
std::vector<attribution::SegmentView> g_oom_segments;
nb::object* g_oom_callback = nullptr;

attribution::BlockState state_of(const alloc::BlockInfo& block) {
  if (block.allocated) return attribution::BlockState::ActiveAllocated;
  if (block.active) return attribution::BlockState::ActivePendingFree;
  return attribution::BlockState::Inactive;
}

nb::list segments_list(const std::vector<attribution::SegmentView>& segments) {
  nb::list out;
  for (const attribution::SegmentView& s : segments) {
    nb::list blocks;
    for (const attribution::BlockView& b : s.blocks) {
      blocks.append(nb::make_tuple(b.size_bytes, b.requested_bytes,
                                   std::string(attribution::block_state_name(b.state))));
    }
    nb::dict d;
    d["device"] = s.device;
    d["address"] = s.address;
    d["total_size"] = s.total_bytes;
    d["requested_size"] = s.requested_bytes;
    d["allocated_size"] = s.allocated_bytes;
    d["active_size"] = s.active_bytes;
    d["stream"] = s.stream;
    d["is_large"] = s.is_large;
    d["is_expandable"] = s.is_expandable;
    d["blocks"] = blocks;
    out.append(d);
  }
  return out;
}

}  // namespace

std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks) {
  std::vector<attribution::SegmentView> out;
  const auto info = alloc::snapshot(c10::MempoolId_t{0, 0}, false);
  std::size_t blocks = 0;
  out.reserve(info.segments.size());
  for (const auto& segment : info.segments) {
    attribution::SegmentView s;
    s.device = static_cast<int32_t>(segment.device);
    s.address = segment.address;
    s.total_bytes = segment.total_size;
    s.requested_bytes = segment.requested_size;
    s.allocated_bytes = segment.allocated_size;
    s.active_bytes = segment.active_size;
    s.stream = reinterpret_cast<uint64_t>(segment.stream);
    s.is_large = segment.is_large;
    s.is_expandable = segment.is_expandable;
    for (const auto& block : segment.blocks) {
      if (blocks++ >= max_blocks) break;
      s.blocks.push_back({block.size, block.requested_size, state_of(block)});
    }
    out.push_back(std::move(s));
  }
  return out;
}

void attribution_on_oom(std::size_t device) noexcept {
  try {
    // Bounded host memory: a million blocks is ~24 MB, far more than real caches hold.
    std::vector<attribution::SegmentView> segments = capture_segments(1'000'000);
    {
      std::lock_guard lock(g_oom_mutex);
      g_oom_segments = std::move(segments);
    }
    if (g_oom_callback == nullptr || !Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    try {
      (*g_oom_callback)(device);
    } catch (const nb::python_error& error) {
      // The post-mortem must never replace the OutOfMemoryError the program is about to see.
      PyErr_Clear();
      static_cast<void>(error);
    }
  } catch (...) {
  }
}

void bind_oom_capture(nb::module_& m) {
  m.def(
      "segments",
      [](bool at_oom) {
        if (at_oom) {
          std::lock_guard lock(g_oom_mutex);
          return segments_list(g_oom_segments);
        }
        std::vector<attribution::SegmentView> now;
        {
          nb::gil_scoped_release release;
          now = capture_segments(1'000'000);
        }
        return segments_list(now);
      },
      "at_oom"_a = false,
      "Allocator segments (snapshot without traces): now, or as captured at the last OOM.");
  m.def(
      "set_oom_callback",
      [](nb::object callback) {
        nb::object* previous = g_oom_callback;
        g_oom_callback = callback.is_none() ? nullptr : new nb::object(std::move(callback));
        // The previous callback object is leaked: the observer may be running it right now on
        // another thread, and an OOM handler is set once or twice per process.
        static_cast<void>(previous);
      },
      "callback"_a, "Call callback(device) with the GIL from the OOM observer (None: stop).");
}

}  // namespace vramscope::agent
