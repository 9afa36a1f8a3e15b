// agent/driver_binding.cpp -- the driver's bytes for one pid on one GPU, for the Monitor's
// per-step "non-PyTorch" number (driver-used minus the allocator's reserved)
//
// NVML is opened on first use, once: a process without a driver (CI, a CPU-only box) pays one
// failed dlopen and then gets None at once.
#include "driver_binding.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "backends/nvml_process_probe.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {

struct ProbeState {
  std::mutex mutex;
  bool opened = false;
  std::unique_ptr<nvml::ProcessMemoryProbe> probe;
  std::string error;
};

/// Leaked on purpose, like the agent's state: it may be used until interpreter exit.
ProbeState& probe_state() {
  static auto* state = new ProbeState();
  return *state;
}

std::optional<uint64_t> driver_process_bytes(const std::string& uuid, uint32_t pid) {
  ProbeState& state = probe_state();
  std::lock_guard lock(state.mutex);
  if (!state.opened) {
    state.opened = true;
    state.probe = nvml::ProcessMemoryProbe::open("", state.error);
  }
  if (!state.probe) return std::nullopt;
  return state.probe->used_bytes(uuid, pid);
}

}  // namespace

void bind_driver(nb::module_& m) {
  m.def("driver_process_bytes", &driver_process_bytes, "uuid"_a, "pid"_a,
        nb::call_guard<nb::gil_scoped_release>(),
        "Bytes the driver (NVML) charges `pid` on the GPU with this UUID; None when NVML is "
        "unusable, the GPU is a MIG instance or unknown, or the pid is not listed (NVML lists "
        "host pids, so not from inside a container's pid namespace).");
  m.def(
      "driver_probe_error",
      [] {
        ProbeState& state = probe_state();
        std::lock_guard lock(state.mutex);
        return state.error;
      },
      "Why NVML could not be opened by driver_process_bytes ('' when it was, or not tried yet).");
}

}  // namespace vramscope::agent
