// agent/py_records.hpp -- the agent's records as Python dicts and lists (the shapes docs/agent-api.md specifies)
//
// One converter per record, shared by the plain readers (stats(), step(), last_oom(), ...) and
// the OOM snapshot, so that a reader and the snapshot never disagree on a key.
#pragma once

#include <nanobind/nanobind.h>

#include <array>
#include <optional>
#include <vector>

#include "vramscope/agent_segment.hpp"
#include "vramscope/attribution/ledger.hpp"
#include "vramscope/attribution/op_registry.hpp"
#include "vramscope/attribution/segment_view.hpp"
#include "vramscope/sample.hpp"
#include "vramscope/tracking/agent_core.hpp"
#include "vramscope/tracking/device_stats.hpp"
#include "vramscope/tracking/events.hpp"

namespace vramscope::agent {

/// {name: value} over tracking::device_stats_fields, in its order (flags as bool).
nanobind::dict stats_dict(const tracking::DeviceStatsView& view);
nanobind::dict step_dict(const StepRecord& record);
nanobind::dict oom_dict(const OomRecord& record);
/// [{"action", "raw_action", "size_bytes", "address", "monotonic_ns"}], oldest first.
nanobind::list events_list(const std::vector<tracking::Event>& events);
/// [{"device", "address", "total_size", ..., "blocks": [(size, requested, state)]}].
nanobind::list segments_list(const std::vector<attribution::SegmentView>& segments);
/// op_table()'s rows: names from `registry`, calls since the profile started from `calls`.
nanobind::list op_rows_list(const std::vector<attribution::OpTotals>& rows,
                            const attribution::OpRegistry& registry,
                            const std::vector<uint64_t>& calls);
/// {name: value} over breakdown_fields, and its non_pytorch_bytes; None for an empty one.
nanobind::object breakdown_object(const std::optional<DriverBreakdown>& breakdown);
/// {category: (live_bytes, live_at_peak_bytes)}.
nanobind::dict categories_dict(
    const std::array<attribution::CategoryTotals, attribution::category_count>& totals);

}  // namespace vramscope::agent
