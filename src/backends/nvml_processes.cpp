// src/backends/nvml_processes.cpp -- reading NVML process lists and merging them per device
#include "vramscope/backends/nvml_processes.hpp"

#include <algorithm>
#include <tuple>

namespace vramscope::nvml {
namespace {

/// Room for what is needed plus a margin, so that a list that grows by a few processes
/// between samples does not cost a second call.
std::size_t with_headroom(std::size_t needed, std::size_t current) {
  return std::max(needed + needed / 4 + 8, current + 8);
}

}  // namespace

Return ProcessListReader::read(const ProcessListCall& call, Device device) {
  m_count = 0;
  if (call.fn == nullptr) return ErrorFunctionNotFound;
  const bool v1 = call.version == 0;
  for (int attempt = 0; attempt < max_process_list_attempts; ++attempt) {
    const std::size_t capacity = v1 ? m_infos_v1.size() : m_infos.size();
    auto count = static_cast<unsigned>(capacity);
    void* buffer = nullptr;
    if (capacity > 0)
      buffer = v1 ? static_cast<void*>(m_infos_v1.data()) : static_cast<void*>(m_infos.data());
    const Return ret = call.fn(device, &count, buffer);
    if (ret == Success) {
      m_count = std::min<std::size_t>(count, capacity);
      if (v1) {
        // Convert into the v2 layout so callers see one shape.
        if (m_infos.size() < m_count) m_infos.resize(m_count);
        for (std::size_t i = 0; i < m_count; ++i) {
          m_infos[i] = {m_infos_v1[i].pid, m_infos_v1[i].usedGpuMemory, no_instance_id,
                        no_instance_id};
        }
      }
      return Success;
    }
    if (ret != ErrorInsufficientSize) return ret;
    const std::size_t grown = with_headroom(count, capacity);
    if (v1) {
      m_infos_v1.resize(grown);
    } else {
      m_infos.resize(grown);
    }
  }
  return ErrorInsufficientSize;
}

void merge_processes(std::vector<MergedProcess>& merged, std::span<const ProcessInfo> entries,
                     uint8_t kind, uint32_t default_gi, uint32_t default_ci) {
  for (const ProcessInfo& info : entries) {
    const uint32_t gi = info.gpuInstanceId == no_instance_id ? default_gi : info.gpuInstanceId;
    const uint32_t ci =
        info.computeInstanceId == no_instance_id ? default_ci : info.computeInstanceId;
    // Lists hold a few dozen entries at most: a linear search beats any map here.
    auto it = std::find_if(merged.begin(), merged.end(), [&](const MergedProcess& p) {
      return p.pid == info.pid && p.gpu_instance_id == gi && p.compute_instance_id == ci;
    });
    if (it == merged.end()) {
      merged.push_back({info.pid, info.usedGpuMemory, gi, ci, kind});
      continue;
    }
    it->kinds = static_cast<uint8_t>(it->kinds | kind);
    // The same process in two lists reports the same memory; keep a known value over N/A.
    if (it->used_bytes == value_not_available ||
        (info.usedGpuMemory != value_not_available && info.usedGpuMemory > it->used_bytes)) {
      it->used_bytes = info.usedGpuMemory;
    }
  }
}

void sort_processes(std::vector<MergedProcess>& merged) {
  std::sort(merged.begin(), merged.end(), [](const MergedProcess& a, const MergedProcess& b) {
    return std::tie(a.pid, a.gpu_instance_id, a.compute_instance_id) <
           std::tie(b.pid, b.gpu_instance_id, b.compute_instance_id);
  });
}

}  // namespace vramscope::nvml
