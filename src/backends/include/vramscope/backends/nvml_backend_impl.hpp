// src/backends/include/vramscope/backends/nvml_backend_impl.hpp -- the NVML DeviceBackend: its per-GPU state and class
//
//
// Sampling may run at 1 kHz over 8 GPUs, so the steady state makes only the calls whose answer
// can change (memory, BAR1, the three process lists: five per GPU), keeps identity (name, UUID,
// bus id) from the first sample, rechecks the MIG mode once a second, reuses every buffer, and
// remembers per handle which calls are unsupported so that they are not retried each sample.
// Failures stay inside the DeviceSample of the GPU concerned: a lost GPU never hides the others.
//
// Internal to src/backends: nvml_backend.cpp samples memory, BAR1 and identity and opens the
// backend; nvml_backend_lists.cpp reads MIG instances and the process lists.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vramscope/backend.hpp"
#include "vramscope/backends/nvml_loader.hpp"
#include "vramscope/backends/nvml_processes.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/backends/proc_info.hpp"

namespace vramscope::nvml {

/// How often the MIG mode and the MIG instances are re-read (MIG reconfiguration is rare).
inline constexpr int64_t mig_refresh_ns = 1'000'000'000;
inline constexpr int64_t never_ns = std::numeric_limits<int64_t>::min() / 2;

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

/// A memory reading from v2 or v1.
struct MemoryReading {
  nvml::Return status = nvml::ErrorFunctionNotFound;
  bool v2 = false;
  uint64_t total = 0;
  uint64_t reserved = 0;
  uint64_t used = 0;
  uint64_t free = 0;
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
  /// Last memory reading, repeated between refreshes while its status is Success (a failed one
  /// is read again at the next sample, so that its error is never repeated silently).
  MemoryReading memory;
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

/// A NUL-terminated NVML string buffer as a std::string, bounded even if the NUL is missing.
inline std::string from_buffer(const char* buffer, std::size_t size) {
  return {buffer, strnlen(buffer, size)};
}

/// An NVML instance id, empty when NVML says "no instance".
inline std::optional<uint32_t> instance_id(uint32_t id) {
  return id == nvml::no_instance_id ? std::nullopt : std::optional<uint32_t>(id);
}

/// The DeviceBackend over NVML (open_nvml_backend() creates it).
class NvmlBackend final : public DeviceBackend {
 public:
  NvmlBackend(std::unique_ptr<nvml::Library> library, unsigned count, std::string driver_version,
              const NvmlOptions& options);

  ~NvmlBackend() override { m_api.shutdown(); }
  NvmlBackend(const NvmlBackend&) = delete;
  NvmlBackend& operator=(const NvmlBackend&) = delete;

  std::string name() const override { return "nvml"; }
  std::string driver_version() const override { return m_driver_version; }
  unsigned device_count() const override { return static_cast<unsigned>(m_gpus.size()); }

  void sample_devices(std::vector<DeviceSample>& out) override;
  void mark_changed() override { m_changed = true; }

 private:
  /// Returns true on Success. Otherwise records why in `sample` (NOT_SUPPORTED and a missing
  /// symbol are silent: the field just stays empty); GPU_IS_LOST marks the GPU lost and drops
  /// its handle so that the next sample asks for a fresh one.
  bool ok(nvml::Return status, GpuState& gpu, DeviceSample& sample, const char* what);

  /// Samples one GPU into `sample`; clears its processes when it stopped early.
  void sample_gpu(GpuState& gpu, DeviceSample& sample, int64_t now_ns, bool refresh);

  /// Fills `sample` (its memory and processes read afresh when `refresh`, else repeated);
  /// false when it stopped early (no handle, GPU lost).
  bool read_gpu(GpuState& gpu, DeviceSample& sample, int64_t now_ns, bool refresh);

  /// Reads name, UUID and bus id once; false when the GPU was lost meanwhile.
  bool read_identity(GpuState& gpu, DeviceSample& sample);

  /// Copies the cached name, UUID and bus id into `sample`.
  static void copy_identity(const GpuState& gpu, DeviceSample& sample);

  /// v2 first (used excludes reserved); v1 when v2 is missing or answers like an old driver.
  MemoryReading read_memory(HandleState& state);

  /// Reads BAR1 into the GPU's cache (the caller reads it at most once per bar1_refresh_ns).
  void read_bar1(GpuState& gpu, DeviceSample& sample);

  /// Re-reads the MIG mode and enumerates MIG devices, at most once per mig_refresh_ns.
  void refresh_mig(GpuState& gpu, DeviceSample& sample, int64_t now_ns);
  /// Memory of each MIG device enumerated by refresh_mig().
  void read_mig_instances(GpuState& gpu, DeviceSample& sample);
  /// Reads the three lists of one handle into gpu.merged; true if any list was read.
  bool read_process_lists(HandleState& state, GpuState& gpu, DeviceSample& sample,
                          uint32_t default_gi, uint32_t default_ci);
  /// All lists of the GPU and of its MIG devices, merged, resolved against /proc.
  void read_processes(GpuState& gpu, DeviceSample& sample);

  std::unique_ptr<nvml::Library> m_library;
  const nvml::Api& m_api;
  std::string m_driver_version;
  bool m_resolve_processes;
  int64_t m_bar1_refresh_ns;
  int64_t m_driver_refresh_ns;
  int64_t m_driver_read_ns = never_ns;
  /// Was mark_changed() called since the last reading?
  bool m_changed = false;
  std::vector<GpuState> m_gpus;
  nvml::ProcessListReader m_reader;
  ProcCache m_proc_cache;
};

}  // namespace vramscope::nvml
