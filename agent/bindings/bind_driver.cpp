// agent/bindings/bind_driver.cpp -- the driver's bytes for one pid on one GPU, through the owner's DriverProbe
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "bindings.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

void bind_driver(nb::module_& m) {
  m.def(
      "driver_process_bytes",
      [](const std::string& uuid, uint32_t pid) {
        return AgentState::instance().driver().process_bytes(uuid, pid);
      },
      "uuid"_a, "pid"_a, nb::call_guard<nb::gil_scoped_release>(),
      "Bytes the driver (NVML) charges `pid` on the GPU with this UUID; None when NVML is "
      "unusable, the GPU is a MIG instance or unknown, or the pid is not listed (NVML lists "
      "host pids, so not from inside a container's pid namespace).");
  m.def(
      "driver_probe_error", [] { return AgentState::instance().driver().error(); },
      "Why NVML could not be opened by driver_process_bytes ('' when it was, or not tried yet).");
}

}  // namespace vramscope::agent
