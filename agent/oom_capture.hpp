// agent/oom_capture.hpp -- what the OOM observer captures for the post-mortem: one snapshot, and the Python hook
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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
struct OomSnapshot {
  /// The failing device.
  std::size_t device = 0;
  OomRecord record;
  /// The failing device's counters.
  tracking::DeviceStatsView stats;
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

/// Keeps the last OOM's snapshot and calls the Python post-mortem hook.
class OomCapture {
 public:
  /// The observer's work after `core` recorded the OOM on `device`: takes the snapshot (with
  /// `session`'s ledgers) and runs the Python callback, if one is set, with the GIL. Never throws.
  void on_oom(tracking::AgentCore& core, attribution::AttributionSession& session,
              std::size_t device) noexcept;
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
