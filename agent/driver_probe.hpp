// agent/driver_probe.hpp -- NVML's view of this process (bound as driver_process_bytes), and the driver's side of a pairing
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "device_allocations.hpp"
#include "vramscope/backends/nvml_process_probe.hpp"
#include "vramscope/tracking/driver_pairing.hpp"

namespace vramscope::agent {

/// NVML's bytes for one pid on one GPU, for the Monitor's per-step "non-PyTorch" number
/// (driver-used minus the allocator's reserved). NVML is opened on first use, once: a process
/// without a driver (CI, a CPU-only box) pays one failed dlopen and then gets None at once.
class DriverProbe {
 public:
  /// Bytes the driver charges `pid` on the GPU `uuid`; empty when NVML is unusable, the GPU is
  /// a MIG instance or unknown, or the pid is not listed.
  std::optional<uint64_t> process_bytes(const std::string& uuid, uint32_t pid);
  /// Why NVML could not be opened ("" when it was, or before the first use).
  std::string error();

 private:
  std::mutex m_mutex;
  /// Has the first use tried to open NVML?
  bool m_opened = false;
  std::unique_ptr<nvml::ProcessMemoryProbe> m_probe;
  std::string m_error;
};

/// The agent's side of a pairing (tracking::DriverPairing): NVML for the process's bytes, the
/// walk of the address space for its allocations.
class AgentDriverSource final : public tracking::DriverSource {
 public:
  /// `uuids[device]` names torch's device `device` to NVML.
  AgentDriverSource(DriverProbe& probe, std::vector<std::string> uuids, uint32_t pid)
      : m_probe(probe), m_uuids(std::move(uuids)), m_pid(pid) {}
  std::optional<uint64_t> process_bytes(std::size_t device) override;
  std::optional<uint64_t> allocation_bytes(std::size_t device) override;

 private:
  DriverProbe& m_probe;
  std::vector<std::string> m_uuids;
  uint32_t m_pid;
  DeviceAllocations m_allocations;
};

}  // namespace vramscope::agent
