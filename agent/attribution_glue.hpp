// agent/attribution_glue.hpp -- per-op RecordFunction tracking and the ledgers, from Python
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

#include "tracking/agent_core.hpp"

namespace vramscope::agent {

/// Feeds `core`'s drained events to the ledgers (called once, at attach, before events flow).
void attribution_attach(tracking::AgentCore& core);

/// Defines the op-tracking and ledger-lifetime functions of vramscope._agent
/// (docs/agent-api.md). `core_of` returns the attached core or throws.
void bind_attribution(nanobind::module_& m, tracking::AgentCore& (*core_of)());

/// Defines the ledger readers (op_table, module_table, live_by_owner, categories, tag, ...).
void bind_attribution_tables(nanobind::module_& m, tracking::AgentCore& (*core_of)());

}  // namespace vramscope::agent
