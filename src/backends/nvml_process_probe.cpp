// src/backends/nvml_process_probe.cpp -- process lists of one GPU, found by UUID
#include "vramscope/backends/nvml_process_probe.hpp"

#include <array>
#include <cstring>

#include "vramscope/backends/nvml_errors.hpp"

namespace vramscope::nvml {

std::unique_ptr<ProcessMemoryProbe> ProcessMemoryProbe::open(const std::string& library_path,
                                                             std::string& error) {
  LoadResult loaded = load_library(library_path);
  if (!loaded.library) {
    error = loaded.message;
    return nullptr;
  }
  const Api& api = loaded.library->api();
  Return status = api.init();
  if (status != Success) {
    error = init_failure_message(api, status);
    return nullptr;
  }
  unsigned count = 0;
  status = api.device_get_count(&count);
  if (status != Success || api.device_get_uuid == nullptr) {
    error = status != Success ? "cannot count the GPUs (" + error_text(api, status) + ")"
                              : std::string("this NVML cannot report GPU UUIDs");
    api.shutdown();
    return nullptr;
  }
  std::vector<std::string> uuids(count);
  for (unsigned i = 0; i < count; ++i) {
    Device handle = nullptr;
    std::array<char, name_buffer_size> text{};
    if (api.device_get_handle_by_index(i, &handle) == Success &&
        api.device_get_uuid(handle, text.data(), name_buffer_size) == Success) {
      uuids[i].assign(text.data(), strnlen(text.data(), text.size()));
    }
  }
  return std::unique_ptr<ProcessMemoryProbe>(
      new ProcessMemoryProbe(std::move(loaded.library), std::move(uuids)));
}

ProcessMemoryProbe::ProcessMemoryProbe(std::unique_ptr<Library> library,
                                       std::vector<std::string> uuids)
    : m_library(std::move(library)), m_uuids(std::move(uuids)) {}

ProcessMemoryProbe::~ProcessMemoryProbe() { m_library->api().shutdown(); }

std::optional<uint64_t> ProcessMemoryProbe::used_bytes(const std::string& uuid, uint32_t pid) {
  if (uuid.empty()) return std::nullopt;
  const Api& api = m_library->api();
  for (unsigned i = 0; i < m_uuids.size(); ++i) {
    if (m_uuids[i] != uuid) continue;
    // Handles are looked up per call: a GPU that was reset gets a new one.
    Device handle = nullptr;
    if (api.device_get_handle_by_index(i, &handle) != Success) return std::nullopt;
    // Compute first: a PyTorch process is in it, so one list call (9-16 µs on an H200) usually
    // answers; graphics and MPS are read only when the pid is not there (MPS clients, others).
    const std::array<const ProcessListCall*, 3> calls = {
        &api.compute_processes, &api.graphics_processes, &api.mps_processes};
    for (const ProcessListCall* call : calls) {
      if (call->fn == nullptr || m_reader.read(*call, handle) != Success) continue;
      for (const ProcessInfo& entry : m_reader.entries()) {
        if (entry.pid != pid) continue;
        if (entry.usedGpuMemory == value_not_available) return std::nullopt;
        return entry.usedGpuMemory;
      }
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace vramscope::nvml
