// agent/bindings/bind_oom.cpp -- the OOM post-mortem's readers: segments, the observer's snapshot, its Python hook
#include <nanobind/stl/string.h>

#include <utility>
#include <vector>

#include "bindings.hpp"
#include "oom_capture.hpp"
#include "py_records.hpp"
#include "torch_hooks.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

void bind_oom(nb::module_& m) {
  m.def(
      "segments",
      [](bool at_oom) {
        if (at_oom) return AgentState::instance().oom().segments_at_oom();
        std::vector<attribution::SegmentView> now;
        {
          nb::gil_scoped_release release;
          now = capture_segments(max_captured_blocks);
        }
        return segments_list(now);
      },
      "at_oom"_a = false,
      "Allocator segments (snapshot without traces): now, or as captured at the last OOM.");
  m.def(
      "oom_snapshot", [] { return AgentState::instance().oom().snapshot_object(); },
      "What the OOM observer captured at the last OOM, or None: {'device', 'oom' (last_oom()), "
      "'stats' (stats() of that device), 'segments' (segments(True)), 'recent_events' (per "
      "device), 'ops' ([{name, live_bytes, live_at_peak_bytes, allocated_bytes}] of the profile "
      "mark, or None without attribution), 'categories' ({category: (live, live_at_peak)} at the "
      "step mark, or None)}.");
  m.def(
      "set_oom_callback",
      [](nb::object callback) { AgentState::instance().oom().set_callback(std::move(callback)); },
      "callback"_a, "Call callback(device) with the GIL from the OOM observer (None: stop).");
}

}  // namespace vramscope::agent
