// agent/attribution_glue.hpp -- per-op tracking, the ledgers' holds and phases, from Python
#pragma once

#include <nanobind/nanobind.h>

namespace vramscope::agent {

/// Defines the profile, hold, phase and module-window functions of vramscope._agent
/// (docs/agent-api.md) over the attached AttributionSession.
void bind_attribution(nanobind::module_& m);

/// Defines the ledger readers (op_table, module_table, live_by_owner, categories, tag, ...).
void bind_attribution_tables(nanobind::module_& m);

}  // namespace vramscope::agent
