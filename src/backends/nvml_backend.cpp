// src/backends/nvml_backend.cpp -- the NVML backend: memory, BAR1 and identity of each GPU
// (the process lists and MIG instances are in nvml_backend_lists.cpp; see nvml_backend_impl.hpp)
#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

#include "vramscope/backends/nvml_backend_impl.hpp"
#include "vramscope/backends/nvml_errors.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/clock.hpp"

namespace vramscope::nvml {
namespace {

/// NVML's "%08X:%02X:%02X.0" bus id: the _v3 call fills busId; older calls only the numbers.
std::string format_bus_id(const nvml::PciInfo& pci, nvml::SymbolVersion version) {
  if (version >= 3 && pci.busId[0] != '\0') return from_buffer(pci.busId, sizeof(pci.busId));
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
  return text.data();
}

/// Clears `sample` for reuse without giving back the capacity of its strings and vectors.
void reset_sample(DeviceSample& sample, uint32_t index) {
  sample.index = index;
  sample.total_bytes.reset();
  sample.reserved_bytes.reset();
  sample.used_bytes.reset();
  sample.free_bytes.reset();
  sample.memory_v2 = false;
  sample.bar1_total_bytes.reset();
  sample.bar1_used_bytes.reset();
  sample.mig_enabled.reset();
  sample.mig_instances.clear();
  sample.processes_supported = false;
  sample.lost = false;
  sample.error.clear();
}

}  // namespace

NvmlBackend::NvmlBackend(std::unique_ptr<nvml::Library> library, unsigned count,
                         std::string driver_version, const NvmlOptions& options)
    : m_library(std::move(library)),
      m_api(m_library->api()),
      m_driver_version(std::move(driver_version)),
      m_resolve_processes(options.resolve_processes),
      m_bar1_refresh_ns(std::max<int64_t>(0, options.bar1_refresh_ns)),
      m_driver_refresh_ns(std::max<int64_t>(0, options.driver_refresh_ns)),
      m_gpus(count) {
  for (unsigned i = 0; i < count; ++i) {
    // A GPU whose handle fails now (lost, no permission) is retried by each sample.
    if (m_api.device_get_handle_by_index(i, &m_gpus[i].gpu.handle) != nvml::Success)
      m_gpus[i].gpu.handle = nullptr;
  }
}

void NvmlBackend::sample_devices(std::vector<DeviceSample>& out) {
  const int64_t now_ns = monotonic_ns();
  // All GPUs refresh their memory and process lists in the same sample: one driver reading,
  // and the /proc cache (which forgets pids not seen in a refreshing sample) keeps every GPU's
  // processes. A quarter of the period early counts as due: samples taken every 10 ms, a
  // little early or late by the scheduler, each read the driver (at 1 ms: every 8th sample).
  const bool refresh =
      m_changed || now_ns - m_driver_read_ns >= m_driver_refresh_ns - m_driver_refresh_ns / 4;
  if (refresh) {
    m_driver_read_ns = now_ns;
    m_changed = false;
    if (m_resolve_processes) m_proc_cache.begin_sample(now_ns);
  }
  out.resize(m_gpus.size());
  for (std::size_t i = 0; i < m_gpus.size(); ++i) {
    reset_sample(out[i], static_cast<uint32_t>(i));
    sample_gpu(m_gpus[i], out[i], now_ns, refresh);
  }
  if (refresh && m_resolve_processes) m_proc_cache.end_sample();
}

bool NvmlBackend::ok(nvml::Return status, GpuState& gpu, DeviceSample& sample, const char* what) {
  if (status == nvml::Success) return true;
  if (status == nvml::ErrorNotSupported || status == nvml::ErrorFunctionNotFound) return false;
  if (status == nvml::ErrorGpuIsLost) {
    sample.lost = true;
    sample.error = nvml::device_error_message(m_api, status, what);
    // A GPU that comes back may sit at another index after a reset: read its identity again.
    gpu.gpu.handle = nullptr;
    gpu.identity_read = false;
    gpu.mig_stale = true;
    gpu.bar1_read_ns = never_ns;
    gpu.processes_read = false;
    return false;
  }
  if (sample.error.empty()) sample.error = nvml::device_error_message(m_api, status, what);
  return false;
}

void NvmlBackend::sample_gpu(GpuState& gpu, DeviceSample& sample, int64_t now_ns, bool refresh) {
  // The sample is reused from the previous call: a GPU that stops half-way must not show
  // the processes of an earlier sample.
  if (!read_gpu(gpu, sample, now_ns, refresh)) sample.processes.clear();
}

bool NvmlBackend::read_gpu(GpuState& gpu, DeviceSample& sample, int64_t now_ns, bool refresh) {
  if (gpu.gpu.handle == nullptr) {
    gpu.memory = {};  // a fresh handle: nothing of the last one is repeated
    const nvml::Return status = m_api.device_get_handle_by_index(sample.index, &gpu.gpu.handle);
    if (!ok(status, gpu, sample, "the device handle")) {
      gpu.gpu.handle = nullptr;
      copy_identity(gpu, sample);
      return false;
    }
  }
  if (!gpu.identity_read && !read_identity(gpu, sample)) return false;
  copy_identity(gpu, sample);

  if (refresh || gpu.memory.status != nvml::Success) gpu.memory = read_memory(gpu.gpu);
  const MemoryReading& memory = gpu.memory;
  if (ok(memory.status, gpu, sample, "memory")) {
    sample.memory_v2 = memory.v2;
    sample.total_bytes = memory.total;
    if (memory.v2) sample.reserved_bytes = memory.reserved;
    sample.used_bytes = memory.used;
    sample.free_bytes = memory.free;
  }
  if (sample.lost) return false;

  if (now_ns - gpu.bar1_read_ns >= m_bar1_refresh_ns) {
    read_bar1(gpu, sample);
    if (sample.lost) return false;
    gpu.bar1_read_ns = now_ns;
  }
  sample.bar1_total_bytes = gpu.bar1_total_bytes;
  sample.bar1_used_bytes = gpu.bar1_used_bytes;
  refresh_mig(gpu, sample, now_ns);
  if (sample.lost) return false;
  sample.mig_enabled = gpu.mig_enabled;
  read_mig_instances(gpu, sample);
  if (sample.lost) return false;
  if (refresh || !gpu.processes_read) {
    read_processes(gpu, sample);
    if (sample.lost) return false;
    gpu.processes_read = true;
  }
  sample.processes_supported = gpu.processes_supported;
  // Copy-assignment reuses the elements' string capacity (hot path at up to 1 kHz).
  sample.processes = gpu.processes;
  return true;
}

bool NvmlBackend::read_identity(GpuState& gpu, DeviceSample& sample) {
  std::array<char, nvml::name_buffer_size> text{};
  if (m_api.device_get_name != nullptr &&
      ok(m_api.device_get_name(gpu.gpu.handle, text.data(), nvml::name_buffer_size), gpu, sample,
         "the name")) {
    gpu.name = from_buffer(text.data(), text.size());
  }
  if (sample.lost) return false;
  text.fill('\0');
  if (m_api.device_get_uuid != nullptr &&
      ok(m_api.device_get_uuid(gpu.gpu.handle, text.data(), nvml::name_buffer_size), gpu, sample,
         "the UUID")) {
    gpu.uuid = from_buffer(text.data(), text.size());
  }
  if (sample.lost) return false;
  nvml::PciInfo pci{};
  if (m_api.device_get_pci_info != nullptr &&
      ok(m_api.device_get_pci_info(gpu.gpu.handle, &pci), gpu, sample, "the PCI bus id")) {
    gpu.pci_bus_id = format_bus_id(pci, m_api.pci_info_version);
  }
  if (sample.lost) return false;
  gpu.identity_read = true;
  return true;
}

void NvmlBackend::copy_identity(const GpuState& gpu, DeviceSample& sample) {
  sample.name = gpu.name;
  sample.uuid = gpu.uuid;
  sample.pci_bus_id = gpu.pci_bus_id;
}

MemoryReading NvmlBackend::read_memory(HandleState& state) {
  MemoryReading reading;
  if (m_api.device_get_memory_info_v2 != nullptr && !state.memory_v2_failed) {
    nvml::MemoryV2 memory{};
    memory.version = nvml::memory_v2_version;
    reading.status = m_api.device_get_memory_info_v2(state.handle, &memory);
    if (reading.status == nvml::Success) {
      reading.v2 = true;
      reading.total = memory.total;
      reading.reserved = memory.reserved;
      reading.used = memory.used;
      reading.free = memory.free;
      return reading;
    }
    const bool old_driver_answer = reading.status == nvml::ErrorFunctionNotFound ||
                                   reading.status == nvml::ErrorArgumentVersionMismatch ||
                                   reading.status == nvml::ErrorUnknown ||
                                   reading.status == nvml::ErrorNotSupported;
    if (!old_driver_answer) return reading;
    state.memory_v2_failed = true;
  }
  if (m_api.device_get_memory_info == nullptr) return reading;
  nvml::Memory memory{};
  reading.status = m_api.device_get_memory_info(state.handle, &memory);
  reading.total = memory.total;
  reading.used = memory.used;
  reading.free = memory.free;
  return reading;
}

void NvmlBackend::read_bar1(GpuState& gpu, DeviceSample& sample) {
  if (gpu.bar1_unsupported) return;
  if (m_api.device_get_bar1_memory_info == nullptr) {
    gpu.bar1_unsupported = true;
    return;
  }
  nvml::Bar1Memory bar1{};
  const nvml::Return status = m_api.device_get_bar1_memory_info(gpu.gpu.handle, &bar1);
  if (status == nvml::ErrorNotSupported) gpu.bar1_unsupported = true;
  gpu.bar1_total_bytes.reset();
  gpu.bar1_used_bytes.reset();
  if (ok(status, gpu, sample, "BAR1 memory")) {
    gpu.bar1_total_bytes = bar1.bar1Total;
    gpu.bar1_used_bytes = bar1.bar1Used;
  }
}

}  // namespace vramscope::nvml

namespace vramscope {

BackendOpenResult open_nvml_backend(const NvmlOptions& options) {
  nvml::LoadResult loaded = nvml::load_library(options.library_path);
  if (!loaded.library) return {nullptr, loaded.failure, std::move(loaded.message)};
  const nvml::Api& api = loaded.library->api();

  nvml::Return status = api.init();
  if (status != nvml::Success) {
    return {nullptr, nvml::init_failure_kind(status), nvml::init_failure_message(api, status)};
  }
  unsigned count = 0;
  status = api.device_get_count(&count);
  if (status != nvml::Success) {
    api.shutdown();
    const BackendFailure failure = status == nvml::ErrorNoPermission
                                       ? BackendFailure::NoPermission
                                       : nvml::init_failure_kind(status);
    return {nullptr, failure, "cannot count the GPUs (" + nvml::error_text(api, status) + ")"};
  }
  if (count == 0) {
    api.shutdown();
    return {nullptr, BackendFailure::NoDevices, "the NVIDIA driver is loaded but reports no GPU"};
  }
  std::string driver;
  std::array<char, nvml::driver_version_buffer_size> text{};
  if (api.system_get_driver_version != nullptr &&
      api.system_get_driver_version(text.data(), nvml::driver_version_buffer_size) ==
          nvml::Success) {
    driver = nvml::from_buffer(text.data(), text.size());
  }
  return {std::make_unique<nvml::NvmlBackend>(std::move(loaded.library), count, std::move(driver),
                                              options),
          BackendFailure::None,
          {}};
}

}  // namespace vramscope
