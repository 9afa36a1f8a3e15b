// agent/agent_module.cpp -- vramscope._agent: nanobind bindings of the in-process agent
//
// The API is specified in docs/agent-api.md (the contract with python/vramscope). Devices are
// CUDA ordinals; no torch object crosses this boundary.
//
// Lifetime: torch has no way to detach a trace tracker, so the state the tracker points at is
// created once and deliberately never destroyed. At interpreter exit an atexit hook stops the
// agent thread and removes the segment file; late callbacks still find valid counters.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "agent_thread.hpp"
#include "attribution/op_registry.hpp"
#include "attribution_glue.hpp"
#include "driver_binding.hpp"
#include "tensorboard_binding.hpp"
#include "torch_hooks.hpp"
#include "tracking/agent_core.hpp"
#include "vramscope/agent_segment.hpp"

#ifndef VRAMSCOPE_TORCH_VERSION
#error "VRAMSCOPE_TORCH_VERSION must be defined by the build (agent/CMakeLists.txt)"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {

/// Everything attach() creates. Leaked on purpose (see file comment).
struct AgentState {
  std::unique_ptr<tracking::AgentCore> core;
  std::unique_ptr<AgentThread> thread;
  std::string mode;
  pid_t creator_pid = 0;
};

std::mutex g_attach_mutex;
/// Read by the tracker without a lock: set once, after the core is complete.
std::atomic<AgentState*> g_state{nullptr};

/// The per-device producers of the core the tracker feeds (core->producers()). Set just before
/// the tracker is attached (events arriving while attach() finishes must land somewhere valid)
/// and, like the state, never released. The tracker reads this one pointer and is then at its
/// data: no chain through the core and its device table (see tracking/device_producer.hpp).
std::atomic<tracking::DeviceProducer*> g_tracked_producers{nullptr};

void forward_event(std::size_t device, tracking::Action action, uint64_t size_bytes,
                   uint64_t address, uint8_t raw_action) noexcept {
  tracking::DeviceProducer* producers = g_tracked_producers.load(std::memory_order_acquire);
  if (producers != nullptr) {
    producers[device].on_event(action, size_bytes, address, raw_action,
                               attribution::current_phase(), attribution::op_for_event());
  }
}

void forward_oom(std::size_t device, uint64_t requested_bytes, uint64_t device_total_bytes,
                 uint64_t device_free_bytes) noexcept {
  AgentState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) return;
  try {
    state->core->record_oom(device, requested_bytes, device_total_bytes, device_free_bytes);
  } catch (...) {
    // An OOM observer must not throw into torch's allocator; the OOM itself still propagates.
  }
  attribution_on_oom(device);
}

AgentState& attached() {
  AgentState* state = g_state.load(std::memory_order_acquire);
  if (state == nullptr) {
    throw std::runtime_error("vramscope agent is not attached (call vramscope.attach())");
  }
  return *state;
}

std::size_t checked_device(const AgentState& state, int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= state.core->device_count()) {
    throw nb::index_error(("CUDA device " + std::to_string(device) + " out of range: " +
                           std::to_string(state.core->device_count()) + " tracked")
                              .c_str());
  }
  return static_cast<std::size_t>(device);
}

std::string attach(double interval_ms, bool publish, int rank, int world_size,
                   const std::vector<std::string>& device_uuids) {
  std::lock_guard lock(g_attach_mutex);
  if (AgentState* state = g_state.load(std::memory_order_acquire)) {
    if (rank >= 0) state->core->set_rank(rank, world_size);
    return state->mode;
  }
  if (!(interval_ms > 0.0) || interval_ms > 3'600'000.0) {
    throw nb::value_error("interval_ms must be in (0, 3600000]");
  }
  const int device_count = cuda_device_count();
  if (device_count <= 0) {
    throw std::runtime_error("CUDA is not available: no CUDA device or driver in this process");
  }
  const std::string backend = allocator_backend();
  const bool pluggable = backend == "pluggable";
  if (!pluggable && !allocator_initialised()) {
    throw std::runtime_error(
        "CUDA is not initialised yet: call torch.cuda.init() (or allocate a CUDA tensor) "
        "before attaching vramscope");
  }

  std::vector<std::string> uuids(device_uuids.begin(), device_uuids.end());
  uuids.resize(static_cast<std::size_t>(device_count));
  tracking::AgentConfig config;
  config.pid = static_cast<uint32_t>(::getpid());
  config.rank = rank;
  config.world_size = world_size;
  std::unique_ptr<AgentSegmentWriter> writer;
  if (publish) {
    writer = AgentSegmentWriter::create(config.pid, static_cast<uint32_t>(device_count));
  }
  tracking::StatsProvider provider;
  if (pluggable) {
    // The pluggable allocator rejects getDeviceStats; do not pay for an exception per tick.
    provider = [](std::size_t) -> std::optional<tracking::TorchStats> { return std::nullopt; };
  } else {
    provider = [](std::size_t device) { return read_device_stats(device); };
  }
  auto state = std::make_unique<AgentState>();
  state->core = std::make_unique<tracking::AgentCore>(std::move(uuids), std::move(provider),
                                                      config, std::move(writer));
  state->creator_pid = ::getpid();
  attribution_attach(*state->core);

  // Once torch holds the tracker, the core it feeds must never be freed, even if a later step
  // of attach() fails.
  bool tracker_attached = false;
  struct LeakOnFailure {
    std::unique_ptr<AgentState>& state;
    bool& tracker_attached;
    ~LeakOnFailure() {
      if (tracker_attached) static_cast<void>(state.release());
    }
  } leak_on_failure{state, tracker_attached};

  std::string polling_reason;
  if (backend != "native") {
    polling_reason = backend + " allocator has no trace events";
  } else {
    g_tracked_producers.store(state->core->producers(), std::memory_order_release);
    try {
      attach_trace_tracker(&forward_event, static_cast<std::size_t>(device_count));
      tracker_attached = true;
    } catch (const std::exception& error) {
      g_tracked_producers.store(nullptr, std::memory_order_release);
      polling_reason = error.what();
    }
  }
  if (polling_reason.empty()) {
    state->mode = "events";
    for (int device = 0; device < device_count; ++device) {
      if (!state->core->seed(static_cast<std::size_t>(device))) {
        state->mode = "events (device " + std::to_string(device) +
                      " not seeded: allocations never paused; values are relative to attach)";
      }
    }
  } else {
    for (int device = 0; device < device_count; ++device) {
      state->core->set_polling_only(static_cast<std::size_t>(device));
    }
    state->mode = "polling: " + polling_reason +
                  (pluggable ? " (and no device stats: nothing to report)" : "");
  }
  if (!pluggable) {
    try {
      attach_oom_observer(&forward_oom, static_cast<std::size_t>(device_count));
    } catch (const std::exception&) {
      // Without an observer OOMs are still visible as oom events and torch's num_ooms.
    }
  }
  state->thread = std::make_unique<AgentThread>(
      *state->core, static_cast<int64_t>(interval_ms * 1'000'000.0));
  std::string mode = state->mode;
  g_state.store(state.release(), std::memory_order_release);
  tracker_attached = false;
  return mode;
}

void shutdown() {
  AgentState* state = g_state.load(std::memory_order_acquire);
  // A fork()ed child inherits the state but not the thread, and must not remove the parent's
  // segment.
  if (state == nullptr || state->creator_pid != ::getpid()) return;
  if (state->thread) {
    nb::gil_scoped_release release;
    state->thread->stop();
  }
  state->core->close_segment();
}

nb::dict stats_dict(const tracking::DeviceStatsView& v) {
  nb::dict d;
  d["allocated_bytes"] = v.allocated_bytes;
  d["reserved_bytes"] = v.reserved_bytes;
  d["requested_bytes"] = v.requested_bytes;
  d["active_bytes"] = v.active_bytes;
  d["inactive_split_bytes"] = v.inactive_split_bytes;
  d["pending_free_bytes"] = v.pending_free_bytes;
  d["peak_allocated_bytes"] = v.peak.allocated_bytes;
  d["peak_reserved_bytes"] = v.peak.reserved_bytes;
  d["peak_requested_bytes"] = v.peak.requested_bytes;
  d["step"] = v.step;
  d["step_peak_allocated_bytes"] = v.last_step_peak.allocated_bytes;
  d["step_peak_reserved_bytes"] = v.last_step_peak.reserved_bytes;
  d["step_peak_requested_bytes"] = v.last_step_peak.requested_bytes;
  d["current_step_peak_allocated_bytes"] = v.current_step_peak.allocated_bytes;
  d["current_step_peak_reserved_bytes"] = v.current_step_peak.reserved_bytes;
  d["current_step_peak_requested_bytes"] = v.current_step_peak.requested_bytes;
  d["window_peak_allocated_bytes"] = v.window_peak.allocated_bytes;
  d["window_peak_reserved_bytes"] = v.window_peak.reserved_bytes;
  d["window_peak_requested_bytes"] = v.window_peak.requested_bytes;
  d["event_count"] = v.event_count;
  d["dropped_event_count"] = v.dropped_event_count;
  d["unknown_event_count"] = v.unknown_event_count;
  d["anomaly_count"] = v.anomaly_count;
  d["oom_count"] = v.oom_count;
  d["polling_only"] = v.polling_only;
  return d;
}

nb::dict step_dict(const StepRecord& r) {
  nb::dict d;
  d["device"] = r.cuda_device;
  d["step"] = r.step;
  d["peak_allocated_bytes"] = r.peak_allocated_bytes;
  d["peak_reserved_bytes"] = r.peak_reserved_bytes;
  d["peak_requested_bytes"] = r.peak_requested_bytes;
  d["allocated_bytes"] = r.allocated_bytes;
  d["reserved_bytes"] = r.reserved_bytes;
  d["duration_ns"] = r.duration_ns;
  d["end_ns"] = r.end_ns;
  if (r.category_bytes) {
    nb::dict categories;
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      categories[std::string(memory_category_names[c]).c_str()] = (*r.category_bytes)[c];
    }
    d["categories"] = categories;
  } else {
    d["categories"] = nb::none();
  }
  return d;
}

nb::dict oom_dict(const OomRecord& r) {
  nb::dict d;
  d["device"] = r.cuda_device;
  d["device_uuid"] = r.device_uuid;
  d["timestamp_ns"] = r.timestamp_ns;
  d["requested_bytes"] = r.requested_bytes;
  d["device_total_bytes"] = r.device_total_bytes;
  d["device_free_bytes"] = r.device_free_bytes;
  d["allocated_bytes"] = r.allocated_bytes;
  d["reserved_bytes"] = r.reserved_bytes;
  return d;
}

/// Reserved/requested: exact event counters, or a fresh poll when there are no events.
uint64_t reserved_now(AgentState& state, std::size_t device) {
  if (state.core->polling_only(device)) return state.core->stats(device).reserved_bytes;
  return state.core->counters(device).reserved_bytes();
}

uint64_t requested_now(AgentState& state, std::size_t device) {
  if (state.core->polling_only(device)) return state.core->stats(device).requested_bytes;
  return state.core->counters(device).requested_bytes();
}

}  // namespace
}  // namespace vramscope::agent

NB_MODULE(_agent, m) {
  using namespace vramscope;
  using namespace vramscope::agent;
  m.doc() = "vramscope's in-process PyTorch allocator agent (see docs/agent-api.md).";

  m.def("attach", &attach, "interval_ms"_a = 10.0, "publish"_a = true, "rank"_a = -1,
        "world_size"_a = -1, "device_uuids"_a = std::vector<std::string>{},
        "Attach the allocator trace tracker and OOM observer to every CUDA device, seed the "
        "counters from torch and start the agent thread. Idempotent. Returns the mode: "
        "'events' or 'polling: <reason>'. Raises RuntimeError without CUDA or before CUDA is "
        "initialised.");
  m.def("is_attached", [] { return g_state.load() != nullptr; }, "Has attach() succeeded?");
  m.def("mode", [] { return attached().mode; }, "'events' or 'polling: <reason>'.");
  m.def("device_count", [] { return attached().core->device_count(); },
        "Number of CUDA devices tracked.");
  m.def(
      "memory_allocated",
      [](int device) {
        AgentState& state = attached();
        return allocated_bytes_now(checked_device(state, device));
      },
      "device"_a, "Bytes in allocated blocks now (torch's counter, exact).");
  m.def(
      "memory_reserved",
      [](int device) {
        AgentState& state = attached();
        return reserved_now(state, checked_device(state, device));
      },
      "device"_a, "Bytes reserved by the caching allocator now (exact, from events).");
  m.def(
      "memory_requested",
      [](int device) {
        AgentState& state = attached();
        return requested_now(state, checked_device(state, device));
      },
      "device"_a, "Bytes the program asked for, before rounding (exact, from events).");
  m.def(
      "max_memory_allocated",
      [](int device) {
        AgentState& state = attached();
        return state.core->stats(checked_device(state, device)).peak.allocated_bytes;
      },
      "device"_a, "vramscope's allocated peak since attach or reset_peak().");
  m.def(
      "max_memory_reserved",
      [](int device) {
        AgentState& state = attached();
        return state.core->stats(checked_device(state, device)).peak.reserved_bytes;
      },
      "device"_a, "vramscope's reserved peak since attach or reset_peak() (exact).");
  m.def(
      "max_memory_requested",
      [](int device) {
        AgentState& state = attached();
        return state.core->stats(checked_device(state, device)).peak.requested_bytes;
      },
      "device"_a, "vramscope's requested peak since attach or reset_peak() (exact).");
  m.def(
      "reset_peak",
      [](int device) {
        AgentState& state = attached();
        state.core->reset_peak(checked_device(state, device));
      },
      "device"_a, "Restart vramscope's peaks at the current values; torch's are never reset.");
  m.def(
      "stats",
      [](int device) {
        AgentState& state = attached();
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
        AgentState& state = attached();
        uint64_t before = 0;
        for (std::size_t d = 0; d < state.core->device_count(); ++d) before += reserved_now(state, d);
        empty_cache();
        uint64_t after = 0;
        for (std::size_t d = 0; d < state.core->device_count(); ++d) after += reserved_now(state, d);
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
        AgentState& state = attached();
        state.core->record_oom(checked_device(state, device), requested_bytes,
                               device_total_bytes, device_free_bytes);
      },
      "device"_a, "requested_bytes"_a, "device_total_bytes"_a, "device_free_bytes"_a,
      "Record an OOM the observer did not see (published to the segment like the observer's).");
  m.def(
      "recent_events",
      [](int device) {
        AgentState& state = attached();
        nb::list out;
        for (const tracking::Event& e : state.core->recent_events(checked_device(state, device))) {
          nb::dict d;
          d["action"] = std::string(tracking::action_name(e.action));
          d["raw_action"] = e.raw_action;
          d["size_bytes"] = e.size_bytes;
          d["address"] = e.address;
          d["monotonic_ns"] = e.timestamp_ns;
          out.append(d);
        }
        return out;
      },
      "device"_a, "Recent allocator events of one device, oldest first (OOM post-mortem).");
  m.def(
      "segment_path",
      [] {
        AgentState* state = g_state.load();
        return state == nullptr ? std::string() : state->core->segment_path();
      },
      "The shared-memory segment file ('' when not publishing or not attached).");
  m.def("torch_version", [] { return std::string(VRAMSCOPE_TORCH_VERSION); },
        "The torch version this module was built against.");
  m.def("allocator_backend", &allocator_backend,
        "torch's CUDA allocator backend: 'native', 'cudaMallocAsync' or 'pluggable'.");
  bind_attribution(m, [] () -> tracking::AgentCore& { return *attached().core; });
  bind_tensorboard(m);
  bind_driver(m);
  m.def("_bench_attach_noop_tracker", &attach_noop_trace_tracker,
        "Benchmark support: attach a trace tracker that does nothing (cannot be undone).");
  m.def("_bench_alloc_pairs", &time_alloc_pairs, "pairs"_a, "size_bytes"_a,
        nb::call_guard<nb::gil_scoped_release>(),
        "Benchmark support: ns per raw_alloc+raw_delete pair, timed in C++ on the current device.");
  m.def(
      "_bench_pause_tracking",
      [](bool paused) {
        AgentState& state = attached();
        if (state.mode.rfind("events", 0) != 0) {
          throw std::runtime_error("the agent is not tracking events (mode: " + state.mode + ")");
        }
        // The tracker stays attached (torch still builds its TraceEntry); only our callback's
        // work is skipped, so a benchmark can compare vramscope's share in one process.
        g_tracked_producers.store(paused ? nullptr : state.core->producers(),
                                  std::memory_order_release);
      },
      "paused"_a,
      "Benchmark support: skip (True) or resume (False) the tracker callback's work. While "
      "paused no event is counted: the agent's numbers stop being exact for good.");
  m.def("_shutdown", &shutdown, "Stop the agent thread and remove the segment (run at exit).");

  nb::module_::import_("atexit").attr("register")(m.attr("_shutdown"));
}
