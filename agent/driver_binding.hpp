// agent/driver_binding.hpp -- vramscope._agent.driver_process_bytes: NVML's view of this process
#pragma once

#include <nanobind/nanobind.h>

namespace vramscope::agent {

/// Defines `driver_process_bytes(uuid, pid)` and `driver_probe_error()` in `m` (docs/agent-api.md).
void bind_driver(nanobind::module_& m);

}  // namespace vramscope::agent
