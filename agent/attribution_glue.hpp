// agent/attribution_glue.hpp -- per-op RecordFunction tracking, ledgers and the OOM post-mortem hooks
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

#include "attribution/fragmentation.hpp"
#include "tracking/agent_core.hpp"

namespace vramscope::agent {

/// Feeds `core`'s drained events to the ledgers (called once, at attach, before events flow).
void attribution_attach(tracking::AgentCore& core);

/// Called by the OOM observer after the core recorded the OOM: captures the allocator's segments
/// (snapshot without traces) and runs the Python post-mortem callback, if one is set, with the
/// GIL. Never throws.
void attribution_on_oom(std::size_t device) noexcept;

/// Defines the attribution functions of vramscope._agent (docs/agent-api.md). `core_of` returns
/// the attached core or throws.
void bind_attribution(nanobind::module_& m, tracking::AgentCore& (*core_of)());

/// The allocator's segments now (c10 snapshot without traces), at most `max_blocks` blocks.
std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks);

}  // namespace vramscope::agent
