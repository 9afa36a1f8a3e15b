// src/tracking/include/vramscope/tracking/device_stats.hpp -- one device's counters as the agent reports them, and their names (one table)
//
// _agent.stats(d) is built from device_stats_fields (agent/py_records.cpp), and the extension
// exports the names (`_agent._device_stats_fields`) so that tests/python/test_stubs.py holds the
// stub, docs/agent-api.md and the polling fallback's keys to this one table.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "vramscope/tracking/device_counters.hpp"

namespace vramscope::tracking {

/// Everything known about one device, for stats() and the Python API.
struct DeviceStatsView {
  uint64_t allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t requested_bytes = 0;
  uint64_t active_bytes = 0;
  uint64_t inactive_split_bytes = 0;
  uint64_t pending_free_bytes = 0;
  /// Since attach or reset_peak().
  EventPeaks peak;
  /// Steps completed (0 before the first step()), the running step's peaks so far, and the
  /// peaks of the last completed step.
  uint64_t step = 0;
  EventPeaks current_step_peak;
  EventPeaks last_step_peak;
  /// Peaks of the last completed window of AgentConfig::window_ns.
  EventPeaks window_peak;
  uint64_t event_count = 0;
  uint64_t dropped_event_count = 0;
  uint64_t unknown_event_count = 0;
  uint64_t anomaly_count = 0;
  /// Small-block arithmetic that disagreed with torch (the device then reads torch at every
  /// block), and large allocations whose block size no reading could settle (peaks may be low).
  uint64_t allocated_mismatch_count = 0;
  uint64_t unsettled_count = 0;
  uint64_t oom_count = 0;
  /// Is this device tracked by polling only (no events)?
  bool polling_only = false;
};

/// One field of DeviceStatsView: its name (a key of _agent.stats()) and how to read it.
struct DeviceStatsField {
  std::string_view name;
  /// The field's value (a flag as 0 or 1).
  uint64_t (*read)(const DeviceStatsView& view);
  /// Is the field a yes/no (a Python bool) rather than a number?
  bool is_flag = false;
};

/// Every field of DeviceStatsView, in the order stats() lists them: a new field goes here too
/// (tests/cpp/tracking/test_device_stats.cpp fails until it does).
inline constexpr std::array<DeviceStatsField, 27> device_stats_fields = {{
    {"allocated_bytes", [](const DeviceStatsView& v) -> uint64_t { return v.allocated_bytes; }},
    {"reserved_bytes", [](const DeviceStatsView& v) -> uint64_t { return v.reserved_bytes; }},
    {"requested_bytes", [](const DeviceStatsView& v) -> uint64_t { return v.requested_bytes; }},
    {"active_bytes", [](const DeviceStatsView& v) -> uint64_t { return v.active_bytes; }},
    {"inactive_split_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.inactive_split_bytes; }},
    {"pending_free_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.pending_free_bytes; }},
    {"peak_allocated_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.peak.allocated_bytes; }},
    {"peak_reserved_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.peak.reserved_bytes; }},
    {"peak_requested_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.peak.requested_bytes; }},
    {"step", [](const DeviceStatsView& v) -> uint64_t { return v.step; }},
    {"step_peak_allocated_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.last_step_peak.allocated_bytes; }},
    {"step_peak_reserved_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.last_step_peak.reserved_bytes; }},
    {"step_peak_requested_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.last_step_peak.requested_bytes; }},
    {"current_step_peak_allocated_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.current_step_peak.allocated_bytes; }},
    {"current_step_peak_reserved_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.current_step_peak.reserved_bytes; }},
    {"current_step_peak_requested_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.current_step_peak.requested_bytes; }},
    {"window_peak_allocated_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.window_peak.allocated_bytes; }},
    {"window_peak_reserved_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.window_peak.reserved_bytes; }},
    {"window_peak_requested_bytes",
     [](const DeviceStatsView& v) -> uint64_t { return v.window_peak.requested_bytes; }},
    {"event_count", [](const DeviceStatsView& v) -> uint64_t { return v.event_count; }},
    {"dropped_event_count",
     [](const DeviceStatsView& v) -> uint64_t { return v.dropped_event_count; }},
    {"unknown_event_count",
     [](const DeviceStatsView& v) -> uint64_t { return v.unknown_event_count; }},
    {"anomaly_count", [](const DeviceStatsView& v) -> uint64_t { return v.anomaly_count; }},
    {"allocated_mismatch_count",
     [](const DeviceStatsView& v) -> uint64_t { return v.allocated_mismatch_count; }},
    {"unsettled_count", [](const DeviceStatsView& v) -> uint64_t { return v.unsettled_count; }},
    {"oom_count", [](const DeviceStatsView& v) -> uint64_t { return v.oom_count; }},
    {"polling_only", [](const DeviceStatsView& v) -> uint64_t { return v.polling_only ? 1 : 0; },
     true},
}};

}  // namespace vramscope::tracking
