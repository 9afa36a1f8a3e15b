// agent/agent_state.cpp -- attach(), the OOM observer's entry, shutdown: the lifetime of the agent's one owner
//
// Lifetime: torch has no way to detach a trace tracker, so the state the tracker points at is
// created once and deliberately never destroyed. At interpreter exit an atexit hook stops the
// agent thread and removes the segment file; late callbacks still find valid counters.
#include "agent_state.hpp"

#include <nanobind/nanobind.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>

#include "vramscope/agent_segment.hpp"
#include "vramscope/format/agent_segments.hpp"

namespace nb = nanobind;

namespace vramscope::agent {

std::string Attachment::mode_text() const {
  if (mode == TrackingMode::Events)
    return mode_reason.empty() ? "events" : "events (" + mode_reason + ")";
  return "polling: " + mode_reason;
}

AgentState& AgentState::instance() {
  // Leaked on purpose: torch may call the tracker, the observer and the op callbacks until the
  // very end of the process, after static destructors would have run.
  static AgentState* const state = new AgentState();
  return *state;
}

void AgentState::on_oom(void* self, std::size_t device, uint64_t requested_bytes,
                        uint64_t device_total_bytes, uint64_t device_free_bytes) noexcept {
  AgentState& state = *static_cast<AgentState*>(self);
  Attachment* attachment = state.attached_or_null();
  if (attachment == nullptr) return;
  try {
    attachment->core->record_oom(device, requested_bytes, device_total_bytes, device_free_bytes);
  } catch (...) {
    // An OOM observer must not throw into torch's allocator; the OOM itself still propagates.
  }
  state.m_oom.on_oom(*attachment->core, *attachment->attribution, state.m_driver, device);
}

Attachment& AgentState::attached() {
  Attachment* attachment = attached_or_null();
  if (attachment == nullptr) {
    throw std::runtime_error("vramscope agent is not attached (call vramscope.attach())");
  }
  return *attachment;
}

namespace {

/// The agent thread's interval in nanoseconds; ValueError outside (0, 1 h].
int64_t checked_interval_ns(double interval_ms) {
  if (!(interval_ms > 0.0) || interval_ms > 3'600'000.0) {
    throw nb::value_error("interval_ms must be in (0, 3600000]");
  }
  return static_cast<int64_t>(interval_ms * 1'000'000.0);
}

/// An attachment around `core`, with the op switch and the attribution session it feeds.
std::unique_ptr<Attachment> new_attachment(std::unique_ptr<tracking::AgentCore> core) {
  auto state = std::make_unique<Attachment>();
  state->core = std::move(core);
  state->creator_pid = ::getpid();
  state->ops = std::make_unique<RecordFunctionSwitch>();
  state->attribution = std::make_unique<attribution::AttributionSession>(*state->core, *state->ops);
  state->ops->set_registry(state->attribution->registry());
  return state;
}

}  // namespace

std::string AgentState::start(std::unique_ptr<Attachment>& state, int64_t interval_ns) {
  try {
    state->thread = start_agent_thread(*state->core, interval_ns);
  } catch (...) {
    // An allocator may already hold the core's tracker: keep the core alive (leaked).
    static_cast<void>(state.release());
    throw;
  }
  std::string mode = state->mode_text();
  // Once an allocator holds the tracker, the core is never freed: the state is published and
  // kept for the life of the process.
  m_attachment.store(state.release(), std::memory_order_release);
  return mode;
}

std::string AgentState::attach(double interval_ms, bool publish, int rank, int world_size,
                               const std::vector<std::string>& device_uuids) {
  std::lock_guard lock(m_attach_mutex);
  if (Attachment* existing = attached_or_null()) {
    if (rank >= 0) existing->core->set_rank(rank, world_size);
    return existing->mode_text();
  }
  const int64_t interval_ns = checked_interval_ns(interval_ms);
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
  const std::vector<std::string> driver_uuids = uuids;
  tracking::AgentConfig config;
  config.pid = static_cast<uint32_t>(::getpid());
  config.rank = rank;
  config.world_size = world_size;
  std::unique_ptr<AgentSegmentWriter> writer;
  if (publish) {
    writer = open_agent_segment_writer(config.pid, static_cast<uint32_t>(device_count));
  }
  tracking::StatsProvider provider;
  if (pluggable) {
    // The pluggable allocator rejects getDeviceStats; do not pay for an exception per tick.
    provider = [](std::size_t) -> std::optional<tracking::TorchStats> { return std::nullopt; };
  } else {
    provider = [](std::size_t device) { return read_device_stats(device); };
  }
  std::unique_ptr<Attachment> state = new_attachment(std::make_unique<tracking::AgentCore>(
      std::move(uuids), std::move(provider), config, std::move(writer)));
  if (!pluggable) {
    for (int device = 0; device < device_count; ++device) {
      state->core->set_totals_probe(static_cast<std::size_t>(device), &read_totals_in_callback,
                                    reinterpret_cast<void*>(static_cast<std::uintptr_t>(device)));
    }
  }

  // Once torch holds the tracker, the core it feeds must never be freed, even if a later step
  // of attach() fails.
  bool tracker_attached = false;
  struct LeakOnFailure {
    std::unique_ptr<Attachment>& state;
    bool& tracker_attached;
    ~LeakOnFailure() {
      if (tracker_attached) static_cast<void>(state.release());
    }
  } leak_on_failure{state, tracker_attached};

  std::string polling_reason;
  if (backend != "native") {
    polling_reason = backend + " allocator has no trace events";
  } else {
    try {
      // Events arriving while attach() finishes land in the core's producers, which exist
      // from here on and are never freed once the tracker holds them.
      attach_trace_tracker(state->core->tracker_target());
      tracker_attached = true;
    } catch (const std::exception& error) {
      polling_reason = error.what();
    }
  }
  if (polling_reason.empty()) {
    state->mode = TrackingMode::Events;
    for (int device = 0; device < device_count; ++device) {
      if (!state->core->seed(static_cast<std::size_t>(device))) {
        state->mode_reason = "device " + std::to_string(device) +
                             " not seeded: allocations never paused; values are relative to attach";
      }
    }
  } else {
    for (int device = 0; device < device_count; ++device) {
      state->core->set_polling_only(static_cast<std::size_t>(device));
    }
    state->mode = TrackingMode::Polling;
    state->mode_reason =
        polling_reason + (pluggable ? " (and no device stats: nothing to report)" : "");
    // Beside the polled slots, for `vramscope top` and the table (before the agent thread
    // starts: the writer is that thread's afterwards).
    state->core->set_polling_reason(state->mode_reason);
  }
  if (state->mode == TrackingMode::Events) start_pairing(*state, driver_uuids, config.pid);
  if (!pluggable) {
    try {
      attach_oom_observer(&AgentState::on_oom, this, static_cast<std::size_t>(device_count));
    } catch (const std::exception&) {
      // Without an observer OOMs are still visible as oom events and torch's num_ooms.
    }
  }
  return start(state, interval_ns);
}

void AgentState::start_pairing(Attachment& state, const std::vector<std::string>& uuids,
                               uint32_t pid) {
  const bool pools = trace_entries_carry_pools();
  std::vector<const tracking::DeviceCounters*> counters;
  for (std::size_t device = 0; device < state.core->device_count(); ++device) {
    tracking::DeviceCounters& device_counters = state.core->producers()[device].counters;
    device_counters.set_pools_tracked(pools);
    counters.push_back(&device_counters);
  }
  state.driver_source = std::make_unique<AgentDriverSource>(m_driver, uuids, pid);
  state.pairing =
      std::make_unique<tracking::DriverPairing>(std::move(counters), *state.driver_source);
  state.core->set_pairing(state.pairing.get());
  state.driver_thread = start_driver_thread(*state.pairing);
}

void AgentState::shutdown() {
  m_polling.close();
  Attachment* state = attached_or_null();
  // A fork()ed child inherits the state but not the thread, and must not remove the parent's
  // segment.
  if (state == nullptr || state->creator_pid != ::getpid()) return;
  if (state->thread) {
    nb::gil_scoped_release release;
    state->thread->stop();
    if (state->driver_thread) state->driver_thread->stop();
  }
  state->core->close_segment();
}

std::string AgentState::attach_cpu_proxy(double interval_ms) {
  std::lock_guard lock(m_attach_mutex);
  if (attached_or_null() != nullptr) {
    throw std::runtime_error(
        "vramscope agent is already attached: the CPU proxy needs a fresh "
        "process");
  }
  const int64_t interval_ns = checked_interval_ns(interval_ms);
  tracking::AgentConfig config;
  config.pid = static_cast<uint32_t>(::getpid());
  // One device, torch's CPU tensors, with no torch stats to poll or seed from: the counters
  // count from attach, which is all a benchmark of the callback's cost needs.
  std::unique_ptr<Attachment> state = new_attachment(std::make_unique<tracking::AgentCore>(
      std::vector<std::string>{""},
      [](std::size_t) -> std::optional<tracking::TorchStats> { return std::nullopt; }, config,
      nullptr));
  attach_cpu_proxy_tracker(state->core->tracker_target());
  state->mode = TrackingMode::Events;
  state->mode_reason = "CPU proxy: torch's CPU tensors as device 0, for benchmarks and tests only";
  return start(state, interval_ns);
}

}  // namespace vramscope::agent
