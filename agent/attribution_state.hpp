// agent/attribution_state.hpp -- what attribution_glue.cpp and attribution_tables.cpp share
#pragma once

#include <cstdint>
#include <vector>

#include "attribution/attributor.hpp"
#include "attribution/op_registry.hpp"

namespace vramscope::agent::glue {

/// Interned op names and per-op call counts. Like the core, leaked on purpose: RecordFunction
/// callbacks may still run at interpreter exit.
extern attribution::OpRegistry* g_registry;
/// The per-device ledgers, created by attribution_attach() (null before it).
extern attribution::Attributor* g_attributor;
/// Per-op call counts when the current (or last) profile started: op_table() reports calls
/// since then. Written by profile_start, read by op_table; both run with the GIL held.
extern std::vector<uint64_t> g_calls_at_start;

}  // namespace vramscope::agent::glue
