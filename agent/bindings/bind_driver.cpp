// agent/bindings/bind_driver.cpp -- the driver's bytes for one pid on one GPU, through the owner's DriverProbe, and this process's bytes part by part
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "py_records.hpp"

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
      "driver_breakdown",
      [](std::size_t device) -> nb::object {
        Attachment& attachment = AgentState::instance().attached();
        if (device >= attachment.core->device_count()) throw nb::index_error("no such device");
        return breakdown_object(attachment.core->driver_breakdown(device));
      },
      "device"_a,
      "The driver's bytes for this process on torch's device `device`, part by part, at the "
      "agent's last settled pairing (docs/agent-api.md): a dict, or None before the first one "
      "or without trace events.");
  m.def(
      "set_nccl",
      [](std::size_t device, uint32_t version, std::optional<uint64_t> nccl_bytes) {
        Attachment& attachment = AgentState::instance().attached();
        if (device >= attachment.core->device_count()) throw nb::index_error("no such device");
        if (attachment.pairing) attachment.pairing->set_nccl(device, version, nccl_bytes);
      },
      "device"_a, "version"_a, "nccl_bytes"_a.none(),
      "NCCL as torch reports it on `device`: its version (major*10000 + minor*100 + patch; 0: "
      "no communicator) and its bytes (None: not reported by this NCCL).");
  m.def(
      "driver_probe_error", [] { return AgentState::instance().driver().error(); },
      "Why NVML could not be opened by driver_process_bytes ('' when it was, or not tried yet).");
}

}  // namespace vramscope::agent
