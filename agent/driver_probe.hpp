// agent/driver_probe.hpp -- NVML's view of this process, opened on first use (bound as driver_process_bytes)
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "vramscope/backends/nvml_process_probe.hpp"

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

}  // namespace vramscope::agent
