// agent/agent_state.hpp -- the agent's one owner: attach(), the attached core and its parts, the OOM capture, the driver probe, the polling segment
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent_thread.hpp"
#include "driver_probe.hpp"
#include "oom_capture.hpp"
#include "polling_segment.hpp"
#include "torch_hooks.hpp"
#include "vramscope/attribution/session.hpp"
#include "vramscope/tracking/agent_core.hpp"

namespace vramscope::agent {

/// How the attached core learns about allocations.
enum class TrackingMode : uint8_t {
  /// From torch's trace-tracker events: exact at every event.
  Events,
  /// From getDeviceStats() polls (no tracker could be attached): sampled.
  Polling,
};

/// What attach() creates. Never destroyed: torch has no way to detach a trace tracker, so the
/// producers it points at must outlive every callback (see agent_state.cpp).
struct Attachment {
  std::unique_ptr<tracking::AgentCore> core;
  /// torch's RecordFunction behind the attribution session's op switch.
  std::unique_ptr<RecordFunctionSwitch> ops;
  /// The ledgers and the policy over them (profiles, holds, step categories).
  std::unique_ptr<attribution::AttributionSession> attribution;
  std::unique_ptr<WorkerThread> thread;
  /// The driver's bytes paired with torch's reserved, part by part (events mode only: a pairing
  /// needs the segment events), and the thread that reads the driver for it.
  std::unique_ptr<AgentDriverSource> driver_source;
  std::unique_ptr<tracking::DriverPairing> pairing;
  std::unique_ptr<WorkerThread> driver_thread;
  TrackingMode mode = TrackingMode::Polling;
  /// Why the mode is what it is: a device that could not be seeded (events), or why no
  /// tracker could be attached (polling). Empty for plain events mode.
  std::string mode_reason;
  /// The process that attached: a fork()ed child inherits the state but not the thread.
  pid_t creator_pid = 0;

  /// "events", "events (<reason>)" or "polling: <reason>" (docs/agent-api.md).
  std::string mode_text() const;
};

/// Everything the extension keeps between calls, in one object created on first use and never
/// destroyed (torch may call the tracker, the OOM observer and the op callbacks until the
/// process ends). Only the binding layer (agent/bindings/) calls instance(); the parts it owns
/// are handed what they need.
class AgentState {
 public:
  static AgentState& instance();

  /// _agent.attach() (docs/agent-api.md): attaches the trace tracker and OOM observer to every
  /// CUDA device, seeds the counters and starts the agent thread. Idempotent; returns the mode.
  std::string attach(double interval_ms, bool publish, int rank, int world_size,
                     const std::vector<std::string>& device_uuids);
  /// attach() for a machine without a GPU (benchmarks, tests): one device, fed by torch's CPU
  /// tensors through the same tracker (agent/torchlib/cpu_proxy.cpp). Throws if already attached.
  std::string attach_cpu_proxy(double interval_ms);
  /// The attachment, or nullptr before attach().
  Attachment* attached_or_null() noexcept { return m_attachment.load(std::memory_order_acquire); }
  /// The attachment; throws std::runtime_error before attach().
  Attachment& attached();
  /// Stops the agent thread and removes the segment, the agent's or the polling one
  /// (registered with atexit). Removes nothing in a fork()ed child, which must not remove its
  /// parent's segment.
  void shutdown();

  /// The allocator's state at the last OOM and the Python post-mortem hook.
  OomCapture& oom() { return m_oom; }
  /// NVML's bytes per process, opened on first use (usable before attach()).
  DriverProbe& driver() { return m_driver; }
  /// The segment Python publishes its polls in when the agent cannot attach (never attached
  /// then: the agent's own segment is its core's).
  PollingSegment& polling() { return m_polling; }

 private:
  AgentState() = default;
  /// Starts `state`'s agent thread and publishes it as the attachment (it is never freed
  /// after: an allocator holds its tracker); returns its mode. Under m_attach_mutex.
  std::string start(std::unique_ptr<Attachment>& state, int64_t interval_ns);
  /// Starts pairing the driver's bytes with torch's reserved for every device of `state`.
  void start_pairing(Attachment& state, const std::vector<std::string>& uuids, uint32_t pid);
  /// The OOM observer's entry; `self` is this state (attach_oom_observer's context).
  static void on_oom(void* self, std::size_t device, uint64_t requested_bytes,
                     uint64_t device_total_bytes, uint64_t device_free_bytes) noexcept;

  std::mutex m_attach_mutex;
  /// Read by the observer and the op callbacks without a lock: set once, when complete.
  std::atomic<Attachment*> m_attachment{nullptr};
  OomCapture m_oom;
  DriverProbe m_driver;
  PollingSegment m_polling;
};

}  // namespace vramscope::agent
