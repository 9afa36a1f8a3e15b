// src/backends/nvml_backend_lists.cpp -- the NVML backend: MIG instances and process lists
#include <array>
#include <utility>

#include "vramscope/backends/nvml_backend_impl.hpp"
#include "vramscope/backends/nvml_errors.hpp"

namespace vramscope::nvml {

void NvmlBackend::refresh_mig(GpuState& gpu, DeviceSample& sample, int64_t now_ns) {
  if (gpu.mig_unsupported) return;
  if (!gpu.mig_stale && now_ns - gpu.mig_checked_ns < mig_refresh_ns) return;
  if (m_api.device_get_mig_mode == nullptr) {
    gpu.mig_unsupported = true;
    return;
  }
  unsigned current = 0;
  unsigned pending = 0;
  const nvml::Return status = m_api.device_get_mig_mode(gpu.gpu.handle, &current, &pending);
  gpu.mig_checked_ns = now_ns;
  if (status == nvml::ErrorNotSupported) {
    gpu.mig_unsupported = true;
    gpu.mig_enabled.reset();
    gpu.mig_slots.clear();
    return;
  }
  if (!ok(status, gpu, sample, "the MIG mode")) return;
  const bool enabled = current == nvml::mig_enabled;
  if (gpu.mig_enabled != enabled)
    gpu.gpu.list_unsupported = {};  // lists behave differently under MIG
  gpu.mig_enabled = enabled;
  gpu.mig_stale = false;

  std::vector<MigSlot> previous = std::move(gpu.mig_slots);
  gpu.mig_slots.clear();
  unsigned max_count = 0;
  if (!enabled || m_api.device_get_max_mig_device_count == nullptr ||
      m_api.device_get_mig_device_handle_by_index == nullptr ||
      !ok(m_api.device_get_max_mig_device_count(gpu.gpu.handle, &max_count), gpu, sample,
          "the MIG devices")) {
    return;
  }
  for (unsigned i = 0; i < max_count; ++i) {
    MigSlot slot;
    slot.index = i;
    const nvml::Return found =
        m_api.device_get_mig_device_handle_by_index(gpu.gpu.handle, i, &slot.state.handle);
    if (found == nvml::ErrorNotFound) continue;  // an empty slot
    if (!ok(found, gpu, sample, "a MIG device")) {
      if (sample.lost) return;
      continue;
    }
    std::array<char, nvml::name_buffer_size> text{};
    if (m_api.device_get_uuid != nullptr &&
        m_api.device_get_uuid(slot.state.handle, text.data(), nvml::name_buffer_size) ==
            nvml::Success) {
      slot.uuid = from_buffer(text.data(), text.size());
    }
    unsigned id = 0;
    if (m_api.device_get_gpu_instance_id != nullptr &&
        m_api.device_get_gpu_instance_id(slot.state.handle, &id) == nvml::Success) {
      slot.gpu_instance_id = id;
    }
    if (m_api.device_get_compute_instance_id != nullptr &&
        m_api.device_get_compute_instance_id(slot.state.handle, &id) == nvml::Success) {
      slot.compute_instance_id = id;
    }
    // Keep what was learnt about the same instance (unsupported calls) across re-enumerations.
    for (const MigSlot& old : previous) {
      if (old.index == slot.index && old.uuid == slot.uuid) {
        slot.state.memory_v2_failed = old.state.memory_v2_failed;
        slot.state.list_unsupported = old.state.list_unsupported;
      }
    }
    gpu.mig_slots.push_back(std::move(slot));
  }
}

void NvmlBackend::read_mig_instances(GpuState& gpu, DeviceSample& sample) {
  sample.mig_instances.resize(gpu.mig_slots.size());
  for (std::size_t i = 0; i < gpu.mig_slots.size(); ++i) {
    MigSlot& slot = gpu.mig_slots[i];
    MigInstanceSample& instance = sample.mig_instances[i];
    instance.index = slot.index;
    instance.uuid = slot.uuid;
    instance.gpu_instance_id = slot.gpu_instance_id;
    instance.compute_instance_id = slot.compute_instance_id;
    instance.total_bytes.reset();
    instance.used_bytes.reset();
    instance.free_bytes.reset();
    const MemoryReading memory = read_memory(slot.state);
    if (memory.status == nvml::ErrorInvalidArgument || memory.status == nvml::ErrorNotFound) {
      gpu.mig_stale = true;  // the instance was destroyed: enumerate again next sample
      continue;
    }
    if (ok(memory.status, gpu, sample, "MIG device memory")) {
      instance.total_bytes = memory.total;
      instance.used_bytes = memory.used;
      instance.free_bytes = memory.free;
    }
    if (sample.lost) return;
  }
}

bool NvmlBackend::read_process_lists(HandleState& state, GpuState& gpu, DeviceSample& sample,
                                     uint32_t default_gi, uint32_t default_ci) {
  const std::array<const nvml::ProcessListCall*, 3> calls = {
      &m_api.compute_processes, &m_api.graphics_processes, &m_api.mps_processes};
  constexpr std::array<uint8_t, 3> kinds = {ProcessKindCompute, ProcessKindGraphics,
                                            ProcessKindMps};
  bool any = false;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (state.list_unsupported[i]) continue;
    const nvml::Return status = m_reader.read(*calls[i], state.handle);
    if (status == nvml::Success) {
      nvml::merge_processes(gpu.merged, m_reader.entries(), kinds[i], default_gi, default_ci);
      any = true;
      continue;
    }
    if (status == nvml::ErrorNotSupported || status == nvml::ErrorFunctionNotFound) {
      state.list_unsupported[i] = true;
      continue;
    }
    if (status == nvml::ErrorInsufficientSize) {
      if (sample.error.empty())
        sample.error = "process list kept growing while being read; retrying next sample";
      continue;
    }
    ok(status, gpu, sample, "the process list");
    if (sample.lost) return any;
  }
  return any;
}

void NvmlBackend::read_processes(GpuState& gpu, DeviceSample& sample) {
  gpu.merged.clear();
  bool supported =
      read_process_lists(gpu.gpu, gpu, sample, nvml::no_instance_id, nvml::no_instance_id);
  if (sample.lost) return;
  for (MigSlot& slot : gpu.mig_slots) {
    supported |= read_process_lists(slot.state, gpu, sample,
                                    slot.gpu_instance_id.value_or(nvml::no_instance_id),
                                    slot.compute_instance_id.value_or(nvml::no_instance_id));
    if (sample.lost) return;
  }
  gpu.processes_supported = supported;
  nvml::sort_processes(gpu.merged);
  // Assign into the existing elements so that their strings keep their capacity.
  gpu.processes.resize(gpu.merged.size());
  for (std::size_t i = 0; i < gpu.merged.size(); ++i) {
    const nvml::MergedProcess& merged = gpu.merged[i];
    ProcessSample& process = gpu.processes[i];
    process.pid = merged.pid;
    process.used_bytes = merged.used_bytes == nvml::value_not_available
                             ? std::nullopt
                             : std::optional<uint64_t>(merged.used_bytes);
    process.gpu_instance_id = instance_id(merged.gpu_instance_id);
    process.compute_instance_id = instance_id(merged.compute_instance_id);
    process.kinds = merged.kinds;
    if (m_resolve_processes) {
      m_proc_cache.resolve(process);
    } else {
      process.visible = false;
      process.user.clear();
      process.command.clear();
    }
  }
}

}  // namespace vramscope::nvml
