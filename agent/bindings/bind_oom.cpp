// agent/bindings/bind_oom.cpp -- the OOM post-mortem's readers: segments, the observer's snapshot (or one taken now), its Python hook
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
      "'stats' (stats() of that device), 'driver_process_bytes' (NVML's bytes for this process "
      "on it, or None), 'driver_breakdown' (driver_breakdown() of it: the last settled one, or "
      "None), 'segments' (segments(True)), 'recent_events' (per device), 'ops' ([{name, "
      "live_bytes, live_at_peak_bytes, allocated_bytes}] of the profile mark, or None without "
      "attribution), 'categories' ({category: (live, live_at_peak)} at the step mark, or "
      "None)}.");
  m.def(
      "oom_snapshot_now",
      [](std::size_t device) {
        AgentState& state = AgentState::instance();
        Attachment& attachment = state.attached();
        if (device >= attachment.core->device_count()) throw nb::index_error("no such device");
        OomSnapshot snapshot;
        {
          // The segments' capture and NVML take milliseconds: other threads run meanwhile.
          nb::gil_scoped_release release;
          snapshot =
              take_oom_snapshot(*attachment.core, *attachment.attribution, state.driver(), device);
        }
        return oom_snapshot_dict(snapshot);
      },
      "device"_a,
      "The snapshot oom_snapshot() holds, taken now for `device`: the post-mortem's one read of "
      "the agent when the observer did not see the OOM (its segments are the allocator's now).");
  m.def(
      "set_oom_callback",
      [](nb::object callback) { AgentState::instance().oom().set_callback(std::move(callback)); },
      "callback"_a, "Call callback(device) with the GIL from the OOM observer (None: stop).");
}

}  // namespace vramscope::agent
