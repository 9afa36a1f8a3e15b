// src/backends/include/vramscope/backends/nvml_process_probe.hpp -- one process's driver-side bytes, for the in-process agent
//
// The Monitor wants "non-PyTorch" per step: what the driver charges this process minus what its
// caching allocator reserved. The full NVML backend samples every GPU (BAR1, MIG, /proc); this
// reads only the process lists of the GPU asked about -- usually the compute list alone, one
// call of 9-16 µs on an H200 -- through the same dlopen path and list reader.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vramscope/backends/nvml_loader.hpp"
#include "vramscope/backends/nvml_processes.hpp"

namespace vramscope::nvml {

/// NVML opened for process lookups by GPU UUID. Not thread-safe (one caller at a time).
class ProcessMemoryProbe {
 public:
  /// Loads and initialises NVML (library as in NvmlOptions::library_path) and reads each GPU's
  /// UUID once. Null with a one-line reason in `error` when NVML is unusable here.
  static std::unique_ptr<ProcessMemoryProbe> open(const std::string& library_path,
                                                  std::string& error);
  ~ProcessMemoryProbe();
  ProcessMemoryProbe(const ProcessMemoryProbe&) = delete;
  ProcessMemoryProbe& operator=(const ProcessMemoryProbe&) = delete;

  /// Driver-side bytes of `pid` on the GPU named `uuid`, from the first of the compute,
  /// graphics and MPS lists that has the pid (a process's bytes are the same in each). Empty when
  /// the GPU is unknown (MIG UUIDs included), no list has the pid -- e.g. the caller runs in
  /// another pid namespace, since NVML lists host pids
  /// -- or NVML reports the amount as not available.
  std::optional<uint64_t> used_bytes(const std::string& uuid, uint32_t pid);

 private:
  ProcessMemoryProbe(std::unique_ptr<Library> library, std::vector<std::string> uuids);

  std::unique_ptr<Library> m_library;
  /// UUID of each NVML index (empty when it could not be read).
  std::vector<std::string> m_uuids;
  ProcessListReader m_reader;
};

}  // namespace vramscope::nvml
