// agent/bindings/bind_steps.cpp -- steps, the distributed rank, OOM records and the recent events
#include <nanobind/stl/optional.h>

#include <cstdint>
#include <optional>

#include "bindings.hpp"
#include "py_records.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

void bind_steps(nb::module_& m) {
  m.def(
      "step",
      [] {
        Attachment& state = attached();
        // Peaks are exact from events; a polling agent (cudaMallocAsync, a pluggable
        // allocator) has only what it sampled, and its records say so.
        const bool exact = state.mode == TrackingMode::Events;
        nb::list out;
        for (const StepRecord& record : state.core->step()) {
          nb::dict d = step_dict(record);
          d["peaks_exact"] = exact;
          out.append(d);
        }
        return out;
      },
      "Close the current step on every device; returns one record per device (peaks_exact: "
      "False when the agent polls).");
  m.def(
      "set_rank", [](int rank, int world_size) { attached().core->set_rank(rank, world_size); },
      "rank"_a, "world_size"_a, "Set the distributed rank and world size put in records.");
  m.def(
      "last_oom",
      []() -> std::optional<nb::dict> {
        const std::optional<OomRecord> oom = attached().core->last_oom();
        if (!oom) return std::nullopt;
        return oom_dict(*oom);
      },
      "The most recent out-of-memory error seen by the observer, or None.");
  m.def(
      "note_oom",
      [](int device, uint64_t requested_bytes, uint64_t device_total_bytes,
         uint64_t device_free_bytes) {
        Attachment& state = attached();
        state.core->record_oom(checked_device(state, device), requested_bytes, device_total_bytes,
                               device_free_bytes);
      },
      "device"_a, "requested_bytes"_a, "device_total_bytes"_a, "device_free_bytes"_a,
      "Record an OOM the observer did not see (published to the segment like the observer's).");
  m.def(
      "recent_events",
      [](int device) {
        Attachment& state = attached();
        return events_list(state.core->recent_events(checked_device(state, device)));
      },
      "device"_a, "Recent allocator events of one device, oldest first (OOM post-mortem).");
}

}  // namespace vramscope::agent
