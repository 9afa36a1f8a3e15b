// agent/oom_capture.hpp -- what the OOM observer captures for the post-mortem: one snapshot (also taken on demand), and the Python hook
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "driver_probe.hpp"
#include "vramscope/agent_segment.hpp"
#include "vramscope/attribution/ledger.hpp"
#include "vramscope/attribution/segment_view.hpp"
#include "vramscope/attribution/session.hpp"
#include "vramscope/tracking/agent_core.hpp"

namespace vramscope::agent {

/// Bounded host memory for a segment capture: a million blocks is ~24 MB, far more than real
/// caches hold.
inline constexpr std::size_t max_captured_blocks = 1'000'000;

/// The allocator and the agent as they were when an OOM's observer ran: everything the Python
/// post-mortem reads, taken at once (before the program's exception handlers free anything).
/// The fallback path (an OOM the observer did not see) takes the same snapshot at once, later.
struct OomSnapshot {
  /// The failing device.
  std::size_t device = 0;
  /// The last OOM recorded (default-constructed before the first).
  OomRecord record;
  /// The failing device's counters.
  tracking::DeviceStatsView stats;
  /// What the driver (NVML) charges this process on the failing device, read when the snapshot
  /// is taken; empty when NVML cannot tell (no driver, a MIG instance, another pid namespace).
  std::optional<uint64_t> driver_process_bytes;
  /// The failing device's last settled breakdown (the pairing's, tracking/driver_pairing.hpp),
  /// so from before the OOM; empty before the first one or without trace events.
  std::optional<DriverBreakdown> driver_breakdown;
  /// Every device's segments (c10 snapshot without traces).
  std::vector<attribution::SegmentView> segments;
  /// Every device's recent events, oldest first.
  std::vector<std::vector<tracking::Event>> recent_events;
  /// Had attribution started ledgers (so that the rows below mean something)?
  bool attributed = false;
  /// The failing device's per-op rows over the current (or last) profile, their names, and
  /// the calls of each op id since that profile started.
  std::vector<attribution::OpTotals> ops;
  std::vector<std::string> op_names;
  /// The failing device's categories at the step mark.
  std::array<attribution::CategoryTotals, attribution::category_count> categories{};
};

/// Takes the snapshot of `device` now: `core`'s counters, events and settled breakdown,
/// `session`'s ledgers, the allocator's segments and `driver`'s bytes for this process. Touches
/// no Python object (call it without the GIL); may throw (std::bad_alloc).
OomSnapshot take_oom_snapshot(tracking::AgentCore& core, attribution::AttributionSession& session,
                              DriverProbe& driver, std::size_t device);
/// `snapshot` as the dict of docs/agent-api.md (oom_snapshot()); needs the GIL.
nanobind::dict oom_snapshot_dict(const OomSnapshot& snapshot);

/// Keeps the last OOM's snapshot and calls the Python post-mortem hook.
class OomCapture {
 public:
  /// The observer's work after `core` recorded the OOM on `device`: takes the snapshot (with
  /// `session`'s ledgers and `driver`'s NVML reading) and runs the Python callback, if one is
  /// set, with the GIL. Never throws.
  void on_oom(tracking::AgentCore& core, attribution::AttributionSession& session,
              DriverProbe& driver, std::size_t device) noexcept;
  /// Sets (or, with None, clears) the hook called as callback(device).
  void set_callback(nanobind::object callback);
  /// The last snapshot as a dict (docs/agent-api.md: oom_snapshot()), or None.
  nanobind::object snapshot_object();
  /// The segments of the last snapshot ([] before any OOM).
  nanobind::list segments_at_oom();

 private:
  std::mutex m_mutex;
  std::optional<OomSnapshot> m_last;
  /// Leaked when replaced: the observer may be running it on another thread right now.
  nanobind::object* m_callback = nullptr;
};

}  // namespace vramscope::agent
