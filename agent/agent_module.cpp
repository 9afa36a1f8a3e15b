// agent/agent_module.cpp -- vramscope._agent: nanobind bindings of the in-process agent
//
// The API is specified in docs/agent-api.md (the contract with python/vramscope). Devices are
// CUDA ordinals; no torch object crosses this boundary.
//
// The attached state and its lifetime are agent_state.cpp's; this file converts records to
// Python and defines the module.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>

#include "agent_state.hpp"
#include "attribution_glue.hpp"
#include "driver_binding.hpp"
#include "oom_capture.hpp"
#include "py_records.hpp"
#include "tensorboard_binding.hpp"
#include "torch_hooks.hpp"
#include "tracking/agent_core.hpp"
#include "vramscope/agent_segment.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {

/// Reserved/requested: exact event counters, or a fresh poll when there are no events.
uint64_t reserved_now(Attachment& state, std::size_t device) {
  if (state.core->polling_only(device)) return state.core->stats(device).reserved_bytes;
  return state.core->counters(device).reserved_bytes();
}

uint64_t requested_now(Attachment& state, std::size_t device) {
  if (state.core->polling_only(device)) return state.core->stats(device).requested_bytes;
  return state.core->counters(device).requested_bytes();
}

}  // namespace
}  // namespace vramscope::agent

NB_MODULE(_agent, m) {
  using namespace vramscope;
  using namespace vramscope::agent;
  m.doc() = "vramscope's in-process PyTorch allocator agent (see docs/agent-api.md).";

  m.def(
      "attach",
      [](double interval_ms, bool publish, int rank, int world_size,
         const std::vector<std::string>& device_uuids) {
        return AgentState::instance().attach(interval_ms, publish, rank, world_size, device_uuids);
      },
      "interval_ms"_a = 10.0, "publish"_a = true, "rank"_a = -1, "world_size"_a = -1,
      "device_uuids"_a = std::vector<std::string>{},
      "Attach the allocator trace tracker and OOM observer to every CUDA device, seed the "
      "counters from torch and start the agent thread. Idempotent. Returns the mode: "
      "'events' or 'polling: <reason>'. Raises RuntimeError without CUDA or before CUDA is "
      "initialised.");
  m.def(
      "is_attached", [] { return attached_or_null() != nullptr; }, "Has attach() succeeded?");
  m.def(
      "mode", [] { return attached().mode_text(); }, "'events' or 'polling: <reason>'.");
  m.def(
      "device_count", [] { return attached().core->device_count(); },
      "Number of CUDA devices tracked.");
  m.def(
      "memory_allocated",
      [](int device) {
        Attachment& state = attached();
        return allocated_bytes_now(checked_device(state, device));
      },
      "device"_a, "Bytes in allocated blocks now (torch's counter, exact).");
  m.def(
      "memory_reserved",
      [](int device) {
        Attachment& state = attached();
        return reserved_now(state, checked_device(state, device));
      },
      "device"_a, "Bytes reserved by the caching allocator now (exact, from events).");
  m.def(
      "memory_requested",
      [](int device) {
        Attachment& state = attached();
        return requested_now(state, checked_device(state, device));
      },
      "device"_a, "Bytes the program asked for, before rounding (exact, from events).");
  m.def(
      "max_memory_allocated",
      [](int device) {
        Attachment& state = attached();
        return state.core->stats(checked_device(state, device)).peak.allocated_bytes;
      },
      "device"_a, "vramscope's allocated peak since attach or reset_peak().");
  m.def(
      "max_memory_reserved",
      [](int device) {
        Attachment& state = attached();
        return state.core->stats(checked_device(state, device)).peak.reserved_bytes;
      },
      "device"_a, "vramscope's reserved peak since attach or reset_peak() (exact).");
  m.def(
      "max_memory_requested",
      [](int device) {
        Attachment& state = attached();
        return state.core->stats(checked_device(state, device)).peak.requested_bytes;
      },
      "device"_a, "vramscope's requested peak since attach or reset_peak() (exact).");
  m.def(
      "reset_peak",
      [](int device) {
        Attachment& state = attached();
        state.core->reset_peak(checked_device(state, device));
      },
      "device"_a, "Restart vramscope's peaks at the current values; torch's are never reset.");
  m.def(
      "stats",
      [](int device) {
        Attachment& state = attached();
        return stats_dict(state.core->stats(checked_device(state, device)));
      },
      "device"_a, "Every counter of one device as a dict.");
  m.def(
      "step",
      [] {
        nb::list out;
        for (const StepRecord& record : attached().core->step()) out.append(step_dict(record));
        return out;
      },
      "Close the current step on every device; returns one record per device.");
  m.def(
      "set_rank", [](int rank, int world_size) { attached().core->set_rank(rank, world_size); },
      "rank"_a, "world_size"_a, "Set the distributed rank and world size put in records.");
  m.def(
      "empty_cache",
      [] {
        Attachment& state = attached();
        uint64_t before = 0;
        for (std::size_t d = 0; d < state.core->device_count(); ++d)
          before += reserved_now(state, d);
        empty_cache();
        uint64_t after = 0;
        for (std::size_t d = 0; d < state.core->device_count(); ++d)
          after += reserved_now(state, d);
        return before > after ? before - after : uint64_t{0};
      },
      "Release cached memory (torch.cuda.empty_cache); returns the reserved bytes released.");
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
  m.def(
      "segment_path",
      [] {
        Attachment* state = attached_or_null();
        return state == nullptr ? std::string() : state->core->segment_path();
      },
      "The shared-memory segment file ('' when not publishing or not attached).");
  m.def("load_torch", &load_torch_library, "path"_a,
        "Load the torch-facing library at `path` (built for the imported torch; "
        "vramscope._torchcheck chooses it) and return the torch version it was built against. "
        "Raises RuntimeError when it cannot be loaded.");
  m.def("torch_version", &loaded_torch_version,
        "The torch version the loaded torch-facing library was built against.");
  m.def("allocator_backend", &allocator_backend,
        "torch's CUDA allocator backend: 'native', 'cudaMallocAsync' or 'pluggable'.");
  bind_attribution(m);
  bind_attribution_tables(m);
  bind_oom_capture(m);
  bind_tensorboard(m);
  bind_driver(m);
  m.def(
      "_bench_attach_cpu_proxy",
      [](double interval_ms) { return AgentState::instance().attach_cpu_proxy(interval_ms); },
      "interval_ms"_a = 10.0,
      "Benchmarks and tests: attach to torch's CPU tensors as device 0, for timing the callback "
      "without a GPU (cannot be undone; instead of attach()). Returns the mode.");
#if VRAMSCOPE_BENCH_HOOKS
  m.def("_bench_attach_noop_tracker", &attach_noop_trace_tracker,
        "Benchmark support: attach a trace tracker that does nothing (cannot be undone).");
  m.def("_bench_alloc_pairs", &time_alloc_pairs, "pairs"_a, "size_bytes"_a,
        nb::call_guard<nb::gil_scoped_release>(),
        "Benchmark support: ns per raw_alloc+raw_delete pair, timed in C++ on the current device.");
  m.def("_bench_pause_tracking", &pause_tracking, "paused"_a,
        "Benchmark support: skip (True) or resume (False) the tracker callback's work. While "
        "paused no event is counted: the agent's numbers stop being exact for good.");
#endif
  m.def(
      "_shutdown", [] { AgentState::instance().shutdown(); },
      "Stop the agent thread and remove the segment (run at exit).");

  nb::module_::import_("atexit").attr("register")(m.attr("_shutdown"));
}
