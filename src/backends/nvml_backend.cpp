// src/backends/nvml_backend.cpp -- the DeviceBackend that reads every GPU through NVML
//
// Sampling may run at 1 kHz over 8 GPUs, so the steady state makes only the calls whose answer
// can change (memory, BAR1, the three process lists: five per GPU), keeps identity (name, UUID,
// bus id) from the first sample, rechecks the MIG mode once a second, reuses every buffer, and
// remembers per handle which calls are unsupported so that they are not retried each sample.
// Failures stay inside the DeviceSample of the GPU concerned: a lost GPU never hides the others.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "backends/nvml_errors.hpp"
#include "backends/nvml_loader.hpp"
#include "backends/nvml_processes.hpp"
#include "backends/proc_info.hpp"
#include "vramscope/backend.hpp"

namespace vramscope {
namespace {

/// How often the MIG mode and the MIG instances are re-read (MIG reconfiguration is rare).
constexpr int64_t mig_refresh_ns = 1'000'000'000;
constexpr int64_t never_ns = std::numeric_limits<int64_t>::min() / 2;

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A NUL-terminated NVML string buffer as a std::string, bounded even if the NUL is missing.
std::string from_buffer(const char* buffer, std::size_t size) { return {buffer, strnlen(buffer, size)}; }

/// NVML's "%08X:%02X:%02X.0" bus id: the _v3 call fills busId; older calls only the numbers.
std::string format_bus_id(const nvml::PciInfo& pci, nvml::SymbolVersion version) {
  if (version >= 3 && pci.busId[0] != '\0') return from_buffer(pci.busId, sizeof(pci.busId));
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
  return text.data();
}

std::optional<uint32_t> instance_id(uint32_t id) {
  return id == nvml::no_instance_id ? std::nullopt : std::optional<uint32_t>(id);
}

/// What outlives one sample for one NVML handle (a GPU or a MIG device).
struct HandleState {
  nvml::Device handle = nullptr;
  /// Did nvmlDeviceGetMemoryInfo_v2 fail in a way that means "use v1 from now on"?
  bool memory_v2_failed = false;
  /// Compute, graphics, MPS lists that answered NOT_SUPPORTED (not asked again).
  std::array<bool, 3> list_unsupported{};
};

/// One MIG device of a MIG-enabled GPU, found by the last enumeration.
struct MigSlot {
  HandleState state;
  uint32_t index = 0;
  std::string uuid;
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
};

/// What outlives one sample for one GPU.
struct GpuState {
  HandleState gpu;
  /// Name, UUID and bus id never change while a handle is valid: read once.
  bool identity_read = false;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  bool bar1_unsupported = false;
  /// Last BAR1 reading and when it was taken (repeated until bar1_refresh_ns has passed).
  int64_t bar1_read_ns = never_ns;
  std::optional<uint64_t> bar1_total_bytes;
  std::optional<uint64_t> bar1_used_bytes;
  /// Last merged process list (repeated between refreshes) and whether it is valid.
  bool processes_read = false;
  bool processes_supported = false;
  std::vector<ProcessSample> processes;
  /// MIG mode: NOT_SUPPORTED means "not a MIG-capable GPU" for good.
  bool mig_unsupported = false;
  std::optional<bool> mig_enabled;
  int64_t mig_checked_ns = never_ns;
  /// Forces re-enumeration at the next sample (a MIG handle went stale, the GPU came back).
  bool mig_stale = true;
  std::vector<MigSlot> mig_slots;
  /// Scratch for merging the process lists (reused, never shrunk).
  std::vector<nvml::MergedProcess> merged;
};

/// A memory reading from v2 or v1.
struct MemoryReading {
  nvml::Return status = nvml::ErrorFunctionNotFound;
  bool v2 = false;
  uint64_t total = 0;
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t free = 0;
};

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

class NvmlBackend final : public DeviceBackend {
 public:
  NvmlBackend(std::unique_ptr<nvml::Library> library, unsigned count, std::string driver_version,
              const NvmlOptions& options)
      : m_library(std::move(library)),
        m_api(m_library->api()),
        m_driver_version(std::move(driver_version)),
        m_resolve_processes(options.resolve_processes),
        m_bar1_refresh_ns(std::max<int64_t>(0, options.bar1_refresh_ns)),
        m_processes_refresh_ns(std::max<int64_t>(0, options.processes_refresh_ns)),
        m_gpus(count) {
    for (unsigned i = 0; i < count; ++i) {
      // A GPU whose handle fails now (lost, no permission) is retried by each sample.
      if (m_api.device_get_handle_by_index(i, &m_gpus[i].gpu.handle) != nvml::Success) m_gpus[i].gpu.handle = nullptr;
    }
  }

  ~NvmlBackend() override { m_api.shutdown(); }
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  std::string name() const override { return "nvml"; }
  std::string driver_version() const override { return m_driver_version; }
  unsigned device_count() const override { return static_cast<unsigned>(m_gpus.size()); }

  void sample_devices(std::vector<DeviceSample>& out) override {
    const int64_t now_ns = steady_now_ns();
    // All GPUs refresh their process lists in the same sample, so that the /proc cache (which
    // forgets pids not seen in a refreshing sample) keeps every GPU's processes.
    const bool refresh_processes = now_ns - m_processes_read_ns >= m_processes_refresh_ns;
    if (refresh_processes) {
      m_processes_read_ns = now_ns;
      if (m_resolve_processes) m_proc_cache.begin_sample(now_ns);
    }
    out.resize(m_gpus.size());
    for (std::size_t i = 0; i < m_gpus.size(); ++i) {
      reset_sample(out[i], static_cast<uint32_t>(i));
      sample_gpu(m_gpus[i], out[i], now_ns, refresh_processes);
    }
    if (refresh_processes && m_resolve_processes) m_proc_cache.end_sample();
  }

 private:
  /// Returns true on Success. Otherwise records why in `sample` (NOT_SUPPORTED and a missing
  /// symbol are silent: the field just stays empty); GPU_IS_LOST marks the GPU lost and drops
  /// its handle so that the next sample asks for a fresh one.
  bool ok(nvml::Return status, GpuState& gpu, DeviceSample& sample, const char* what) {
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

  void sample_gpu(GpuState& gpu, DeviceSample& sample, int64_t now_ns, bool refresh_processes) {
    // The sample is reused from the previous call: a GPU that stops half-way must not show
    // the processes of an earlier sample.
    if (!read_gpu(gpu, sample, now_ns, refresh_processes)) sample.processes.clear();
  }

  /// Fills `sample`; false when it stopped early (no handle, GPU lost).
  bool read_gpu(GpuState& gpu, DeviceSample& sample, int64_t now_ns, bool refresh_processes) {
    if (gpu.gpu.handle == nullptr) {
      const nvml::Return status = m_api.device_get_handle_by_index(sample.index, &gpu.gpu.handle);
      if (!ok(status, gpu, sample, "the device handle")) {
        gpu.gpu.handle = nullptr;
        copy_identity(gpu, sample);
        return false;
      }
    }
    if (!gpu.identity_read && !read_identity(gpu, sample)) return false;
    copy_identity(gpu, sample);

    const MemoryReading memory = read_memory(gpu.gpu);
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
    if (refresh_processes || !gpu.processes_read) {
      read_processes(gpu, sample);
      if (sample.lost) return false;
      gpu.processes_read = true;
    }
    sample.processes_supported = gpu.processes_supported;
    // Copy-assignment reuses the elements' string capacity (hot path at up to 1 kHz).
    sample.processes = gpu.processes;
    return true;
  }

  /// Reads name, UUID and bus id once; false when the GPU was lost meanwhile.
  bool read_identity(GpuState& gpu, DeviceSample& sample) {
    std::array<char, nvml::name_buffer_size> text{};
    if (m_api.device_get_name != nullptr &&
        ok(m_api.device_get_name(gpu.gpu.handle, text.data(), nvml::name_buffer_size), gpu, sample, "the name")) {
      gpu.name = from_buffer(text.data(), text.size());
    }
    if (sample.lost) return false;
    text.fill('\0');
    if (m_api.device_get_uuid != nullptr &&
        ok(m_api.device_get_uuid(gpu.gpu.handle, text.data(), nvml::name_buffer_size), gpu, sample, "the UUID")) {
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

  static void copy_identity(const GpuState& gpu, DeviceSample& sample) {
    sample.name = gpu.name;
    sample.uuid = gpu.uuid;
    sample.pci_bus_id = gpu.pci_bus_id;
  }

  /// v2 first (used excludes reserved); v1 when v2 is missing or answers like an old driver.
  MemoryReading read_memory(HandleState& state) {
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
      const bool old_driver_answer =
          reading.status == nvml::ErrorFunctionNotFound || reading.status == nvml::ErrorArgumentVersionMismatch ||
          reading.status == nvml::ErrorUnknown || reading.status == nvml::ErrorNotSupported;
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

  void read_bar1(GpuState& gpu, DeviceSample& sample) {
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

  /// Re-reads the MIG mode and enumerates MIG devices, at most once per mig_refresh_ns.
  void refresh_mig(GpuState& gpu, DeviceSample& sample, int64_t now_ns);
  /// Memory of each MIG device enumerated by refresh_mig().
  void read_mig_instances(GpuState& gpu, DeviceSample& sample);
  /// Reads the three lists of one handle into gpu.merged; true if any list was read.
  bool read_process_lists(HandleState& state, GpuState& gpu, DeviceSample& sample, uint32_t default_gi,
                          uint32_t default_ci);
  /// All lists of the GPU and of its MIG devices, merged, resolved against /proc.
  void read_processes(GpuState& gpu, DeviceSample& sample);

  std::unique_ptr<nvml::Library> m_library;
  const nvml::Api& m_api;
  std::string m_driver_version;
  bool m_resolve_processes;
  int64_t m_bar1_refresh_ns;
  int64_t m_processes_refresh_ns;
  int64_t m_processes_read_ns = never_ns;
  std::vector<GpuState> m_gpus;
  nvml::ProcessListReader m_reader;
  ProcCache m_proc_cache;
};

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
  if (gpu.mig_enabled != enabled) gpu.gpu.list_unsupported = {};  // lists behave differently under MIG
  gpu.mig_enabled = enabled;
  gpu.mig_stale = false;

  std::vector<MigSlot> previous = std::move(gpu.mig_slots);
  gpu.mig_slots.clear();
  unsigned max_count = 0;
  if (!enabled || m_api.device_get_max_mig_device_count == nullptr ||
      m_api.device_get_mig_device_handle_by_index == nullptr ||
      !ok(m_api.device_get_max_mig_device_count(gpu.gpu.handle, &max_count), gpu, sample, "the MIG devices")) {
    return;
  }
  for (unsigned i = 0; i < max_count; ++i) {
    MigSlot slot;
    slot.index = i;
    const nvml::Return found = m_api.device_get_mig_device_handle_by_index(gpu.gpu.handle, i, &slot.state.handle);
    if (found == nvml::ErrorNotFound) continue;  // an empty slot
    if (!ok(found, gpu, sample, "a MIG device")) {
      if (sample.lost) return;
      continue;
    }
    std::array<char, nvml::name_buffer_size> text{};
    if (m_api.device_get_uuid != nullptr &&
        m_api.device_get_uuid(slot.state.handle, text.data(), nvml::name_buffer_size) == nvml::Success) {
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

bool NvmlBackend::read_process_lists(HandleState& state, GpuState& gpu, DeviceSample& sample, uint32_t default_gi,
                                     uint32_t default_ci) {
  const std::array<const nvml::ProcessListCall*, 3> calls = {&m_api.compute_processes, &m_api.graphics_processes,
                                                             &m_api.mps_processes};
  constexpr std::array<uint8_t, 3> kinds = {ProcessKindCompute, ProcessKindGraphics, ProcessKindMps};
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
      if (sample.error.empty()) sample.error = "process list kept growing while being read; retrying next sample";
      continue;
    }
    ok(status, gpu, sample, "the process list");
    if (sample.lost) return any;
  }
  return any;
}

void NvmlBackend::read_processes(GpuState& gpu, DeviceSample& sample) {
  gpu.merged.clear();
  bool supported = read_process_lists(gpu.gpu, gpu, sample, nvml::no_instance_id, nvml::no_instance_id);
  if (sample.lost) return;
  for (MigSlot& slot : gpu.mig_slots) {
    supported |= read_process_lists(slot.state, gpu, sample, slot.gpu_instance_id.value_or(nvml::no_instance_id),
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
    process.used_bytes = merged.used_bytes == nvml::value_not_available ? std::nullopt
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

}  // namespace

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
    const BackendFailure failure =
        status == nvml::ErrorNoPermission ? BackendFailure::NoPermission : nvml::init_failure_kind(status);
    return {nullptr, failure, "cannot count the GPUs (" + nvml::error_text(api, status) + ")"};
  }
  if (count == 0) {
    api.shutdown();
    return {nullptr, BackendFailure::NoDevices, "the NVIDIA driver is loaded but reports no GPU"};
  }
  std::string driver;
  std::array<char, nvml::driver_version_buffer_size> text{};
  if (api.system_get_driver_version != nullptr &&
      api.system_get_driver_version(text.data(), nvml::driver_version_buffer_size) == nvml::Success) {
    driver = from_buffer(text.data(), text.size());
  }
  return {std::make_unique<NvmlBackend>(std::move(loaded.library), count, std::move(driver), options),
          BackendFailure::None, {}};
}

}  // namespace vramscope
