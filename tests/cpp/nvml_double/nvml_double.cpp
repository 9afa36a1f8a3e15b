// tests/cpp/nvml_double/nvml_double.cpp -- a scripted NVML library for tests and benchmarks
//
// Built as libvramscope_nvml_double*.so and loaded through the real dlopen path
// (VRAMSCOPE_NVML_LIBRARY=<that .so>). It exports the NVML C functions vramscope calls and
// answers from a JSON script named by $VRAMSCOPE_NVML_DOUBLE_SCRIPT, read at nvmlInit (and by
// vramscope_nvml_double_reload()). Struct layouts are transcribed from nvml.h independently of
// vramscope/backends/nvml_api.hpp, so that a layout mistake there shows up as wrong values in
// tests.
//
// Script format (every key optional unless marked):
//   {
//     "driver_version": "580.159.03",
//     "init": "SUCCESS",                 nvmlInit result, e.g. "DRIVER_NOT_LOADED", or a number
//     "count": "SUCCESS",                nvmlDeviceGetCount result
//     "devices": [{
//       "name": "NVIDIA H200", "uuid": "GPU-…",
//       "pci": {"domain": 0, "bus": 24, "device": 0},
//       "memory": {"total": T, "reserved": R, "used": U, "free": F},   free defaults to T-R-U;
//                                        the v1 call reports used = U + R, like the driver
//       "bar1": {"total": B, "used": b},  absent: BAR1 is NOT_SUPPORTED
//       "mig_mode": 1,                    absent: MIG is NOT_SUPPORTED; 0 disabled, 1 enabled
//       "max_mig_devices": 7,
//       "mig_instances": [{"slot": 0, "uuid": "MIG-…", "gpu_instance_id": 1,
//                          "compute_instance_id": 0, "memory": {…}, "processes": […]}],
//       "processes": [{"pid": 1234 | "self", "used": N | "n/a",
//                      "kinds": ["compute", "graphics", "mps"],          default ["compute"]
//                      "gpu_instance_id": 1, "compute_instance_id": 0}],  default: none (~0U)
//       "errors": {"handle": "GPU_IS_LOST", "memory_v2": "NOT_SUPPORTED", …},
//                 keys: handle name uuid pci memory memory_v2 bar1 compute_processes
//                 graphics_processes mps_processes mig_mode max_mig_devices mig_handle
//       "grow_processes": {"times": 3, "by": 40}   each of the next `times` compute-list calls
//                                        first adds `by` processes (pids 90000000+), so the
//                                        count-then-fill dance sees INSUFFICIENT_SIZE
//     }]
//   }
// "self" is the pid of the process that loaded the double (visible in /proc); pids above
// pid_max (e.g. 90000001) are never visible, like host pids seen from a container.
//
// Variants (compile definitions decide what dlsym can see):
//   vramscope_nvml_double        every symbol, newest versions included
//   vramscope_nvml_double_nov2   no _v2/_v3 names: unversioned calls and v1 structs only
//   vramscope_nvml_double_min    only nvmlInit, nvmlShutdown, nvmlDeviceGetCount,
//                                nvmlDeviceGetHandleByIndex, nvmlDeviceGetMemoryInfo
//   vramscope_nvml_double_nocount  no nvmlDeviceGetCount at all (a mandatory symbol missing)
//
// Test hooks (dlsym them from the test process): vramscope_nvml_double_reload(),
// vramscope_nvml_double_calls("nvmlDeviceGetMemoryInfo_v2"), vramscope_nvml_double_reset_calls().
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "nvml_double_script.hpp"

#ifndef VRAMSCOPE_NVML_DOUBLE_VERSIONED
#define VRAMSCOPE_NVML_DOUBLE_VERSIONED 1
#endif
#ifndef VRAMSCOPE_NVML_DOUBLE_OPTIONAL
#define VRAMSCOPE_NVML_DOUBLE_OPTIONAL 1
#endif
#ifndef VRAMSCOPE_NVML_DOUBLE_COUNT
#define VRAMSCOPE_NVML_DOUBLE_COUNT 1
#endif

#define VRAMSCOPE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

using namespace vramscope_double;

// nvml.h layouts, transcribed.
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct {
  unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;
typedef void* nvmlDevice_t;

namespace {

constexpr unsigned memory_v2_version = static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2U << 24U);

/// Counts the call, then answers UNINITIALIZED outside nvmlInit/nvmlShutdown like the driver.
/// The counter is looked up once per call site, so counting costs one increment.
#define VRAMSCOPE_DOUBLE_ENTER(fn)                                \
  static unsigned long long& vramscope_calls_ = call_counter(fn); \
  ++vramscope_calls_;                                             \
  if (state().init_depth == 0) return CodeUninitialized

Entity* entity_of(nvmlDevice_t device) { return state().entity_of(device); }

[[maybe_unused]] int copy_text(const std::string& text, char* out, unsigned length) {
  if (out == nullptr) return CodeInvalidArgument;
  if (text.size() + 1 > length) return CodeInsufficientSize;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return CodeSuccess;
}

[[maybe_unused]] int get_processes(nvmlDevice_t device, unsigned* count, void* infos,
                                   ProcessKindBit kind, ErrorKey key, bool v1) {
  Entity* entity = entity_of(device);
  if (entity == nullptr || count == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[key]) return error;
  if (kind == KindCompute) entity->grow();
  unsigned needed = 0;
  for (const Process& p : entity->processes) needed += (p.kinds & kind) != 0 ? 1U : 0U;
  if (*count < needed) {
    *count = needed;
    return needed == 0 ? CodeSuccess : CodeInsufficientSize;
  }
  if (needed > 0 && infos == nullptr) return CodeInvalidArgument;
  unsigned i = 0;
  for (const Process& p : entity->processes) {
    if ((p.kinds & kind) == 0) continue;
    if (v1) {
      static_cast<nvmlProcessInfo_v1_t*>(infos)[i] = {p.pid, p.used};
    } else {
      static_cast<nvmlProcessInfo_t*>(infos)[i] = {p.pid, p.used, p.gpu_instance_id,
                                                   p.compute_instance_id};
    }
    ++i;
  }
  *count = needed;
  return CodeSuccess;
}

[[maybe_unused]] int get_pci(nvmlDevice_t device, nvmlPciInfo_t* pci, bool v3) {
  Entity* entity = entity_of(device);
  if (entity == nullptr || pci == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrPci]) return error;
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", entity->pci_domain,
                entity->pci_bus, entity->pci_device);
  pci->domain = entity->pci_domain;
  pci->bus = entity->pci_bus;
  pci->device = entity->pci_device;
  pci->pciDeviceId = 0x233510DE;
  pci->pciSubSystemId = 0x18A610DE;
  // Older calls have no room for busId: leave the caller's bytes alone, as they would.
  if (v3) {
    std::snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", entity->pci_domain,
                  entity->pci_bus, entity->pci_device);
  }
  return CodeSuccess;
}

int get_handle(unsigned index, nvmlDevice_t* device) {
  if (device == nullptr || index >= state().devices.size()) return CodeInvalidArgument;
  if (int error = state().devices[index].errors[ErrHandle]) return error;
  *device = State::handle_of(index, -1);
  return CodeSuccess;
}

[[maybe_unused]] int get_count(unsigned* count) {
  if (count == nullptr) return CodeInvalidArgument;
  if (state().count_result != CodeSuccess) return state().count_result;
  *count = static_cast<unsigned>(state().devices.size());
  return CodeSuccess;
}

int do_init() {
  if (state().init_depth == 0 && !state().load_from_env()) return CodeUnknown;
  if (state().init_result != CodeSuccess) return state().init_result;
  ++state().init_depth;
  return CodeSuccess;
}

}  // namespace

// ---- mandatory, v1 names (every variant) ----

VRAMSCOPE_NVML_EXPORT int nvmlInit() {
  static unsigned long long& calls = call_counter("nvmlInit");
  ++calls;
  return do_init();
}

VRAMSCOPE_NVML_EXPORT int nvmlShutdown() {
  VRAMSCOPE_DOUBLE_ENTER("nvmlShutdown");
  --state().init_depth;
  return CodeSuccess;
}

#if VRAMSCOPE_NVML_DOUBLE_COUNT
VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetCount(unsigned* count) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetCount");
  return get_count(count);
}
#endif

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t* device) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetHandleByIndex");
  return get_handle(index, device);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetMemoryInfo");
  Entity* entity = entity_of(device);
  if (entity == nullptr || memory == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrMemory]) return error;
  if (!entity->has_memory) return CodeNotSupported;
  // v1 "used" includes what the driver reserves (observed on R510+ drivers).
  *memory = {entity->total, entity->free, entity->used + entity->reserved};
  return CodeSuccess;
}

// ---- newest versions (full variant only) ----

#if VRAMSCOPE_NVML_DOUBLE_VERSIONED
VRAMSCOPE_NVML_EXPORT int nvmlInit_v2() {
  static unsigned long long& calls = call_counter("nvmlInit_v2");
  ++calls;
  return do_init();
}

#if VRAMSCOPE_NVML_DOUBLE_COUNT
VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetCount_v2(unsigned* count) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetCount_v2");
  return get_count(count);
}
#endif

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* device) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetHandleByIndex_v2");
  return get_handle(index, device);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetMemoryInfo_v2");
  Entity* entity = entity_of(device);
  if (entity == nullptr || memory == nullptr) return CodeInvalidArgument;
  // The real driver checks the version word before anything else.
  if (memory->version != memory_v2_version) return CodeArgumentVersionMismatch;
  if (int error = entity->errors[ErrMemoryV2]) return error;
  if (!entity->has_memory) return CodeNotSupported;
  memory->total = entity->total;
  memory->reserved = entity->reserved;
  memory->free = entity->free;
  memory->used = entity->used;
  return CodeSuccess;
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetPciInfo_v3");
  return get_pci(device, pci, true);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetPciInfo_v2");
  return get_pci(device, pci, false);
}

#define VRAMSCOPE_DOUBLE_PROCESS_LIST(name, kind, key)                      \
  VRAMSCOPE_NVML_EXPORT int name##_v3(nvmlDevice_t device, unsigned* count, \
                                      nvmlProcessInfo_t* infos) {           \
    VRAMSCOPE_DOUBLE_ENTER(#name "_v3");                                    \
    return get_processes(device, count, infos, kind, key, false);           \
  }                                                                         \
  VRAMSCOPE_NVML_EXPORT int name##_v2(nvmlDevice_t device, unsigned* count, \
                                      nvmlProcessInfo_t* infos) {           \
    VRAMSCOPE_DOUBLE_ENTER(#name "_v2");                                    \
    return get_processes(device, count, infos, kind, key, false);           \
  }
VRAMSCOPE_DOUBLE_PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses, KindCompute,
                              ErrComputeProcesses)
VRAMSCOPE_DOUBLE_PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses, KindGraphics,
                              ErrGraphicsProcesses)
VRAMSCOPE_DOUBLE_PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses, KindMps, ErrMpsProcesses)
#endif

// ---- optional, unversioned names (full and nov2 variants) ----

#if VRAMSCOPE_NVML_DOUBLE_OPTIONAL
VRAMSCOPE_NVML_EXPORT const char* nvmlErrorString(int result) { return error_string(result); }

VRAMSCOPE_NVML_EXPORT int nvmlSystemGetDriverVersion(char* version, unsigned length) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlSystemGetDriverVersion");
  return copy_text(state().driver_version, version, length);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned length) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetName");
  Entity* entity = entity_of(device);
  if (entity == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrName]) return error;
  return copy_text(entity->name, name, length);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned length) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetUUID");
  Entity* entity = entity_of(device);
  if (entity == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrUuid]) return error;
  return copy_text(entity->uuid, uuid, length);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetPciInfo");
  return get_pci(device, pci, false);
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t* bar1) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetBAR1MemoryInfo");
  Entity* entity = entity_of(device);
  if (entity == nullptr || bar1 == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrBar1]) return error;
  if (!entity->has_bar1) return CodeNotSupported;
  *bar1 = {entity->bar1_total, entity->bar1_total - entity->bar1_used, entity->bar1_used};
  return CodeSuccess;
}

#define VRAMSCOPE_DOUBLE_PROCESS_LIST_V1(name, kind, key)              \
  VRAMSCOPE_NVML_EXPORT int name(nvmlDevice_t device, unsigned* count, \
                                 nvmlProcessInfo_v1_t* infos) {        \
    VRAMSCOPE_DOUBLE_ENTER(#name);                                     \
    return get_processes(device, count, infos, kind, key, true);       \
  }
VRAMSCOPE_DOUBLE_PROCESS_LIST_V1(nvmlDeviceGetComputeRunningProcesses, KindCompute,
                                 ErrComputeProcesses)
VRAMSCOPE_DOUBLE_PROCESS_LIST_V1(nvmlDeviceGetGraphicsRunningProcesses, KindGraphics,
                                 ErrGraphicsProcesses)
VRAMSCOPE_DOUBLE_PROCESS_LIST_V1(nvmlDeviceGetMPSComputeRunningProcesses, KindMps, ErrMpsProcesses)

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned* current,
                                               unsigned* pending) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetMigMode");
  Entity* entity = entity_of(device);
  if (entity == nullptr || current == nullptr || pending == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrMigMode]) return error;
  if (entity->mig_mode < 0) return CodeNotSupported;
  *current = *pending = static_cast<unsigned>(entity->mig_mode);
  return CodeSuccess;
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned* count) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetMaxMigDeviceCount");
  Entity* entity = entity_of(device);
  if (entity == nullptr || count == nullptr) return CodeInvalidArgument;
  if (int error = entity->errors[ErrMaxMigDevices]) return error;
  if (entity->mig_mode < 0) return CodeNotSupported;
  *count = entity->max_mig_devices;
  return CodeSuccess;
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned index,
                                                              nvmlDevice_t* mig_device) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetMigDeviceHandleByIndex");
  Entity* entity = entity_of(device);
  if (entity == nullptr || mig_device == nullptr || entity->is_mig) return CodeInvalidArgument;
  if (int error = entity->errors[ErrMigHandle]) return error;
  if (entity->mig_mode != 1 || index >= entity->max_mig_devices) return CodeInvalidArgument;
  const int position = State::mig_position(*entity, index);
  if (position < 0) return CodeNotFound;
  *mig_device = State::handle_of(entity->index, position);
  return CodeSuccess;
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned* id) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetGpuInstanceId");
  Entity* entity = entity_of(device);
  if (entity == nullptr || id == nullptr) return CodeInvalidArgument;
  if (!entity->is_mig) return CodeNotSupported;
  *id = entity->gpu_instance_id;
  return CodeSuccess;
}

VRAMSCOPE_NVML_EXPORT int nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned* id) {
  VRAMSCOPE_DOUBLE_ENTER("nvmlDeviceGetComputeInstanceId");
  Entity* entity = entity_of(device);
  if (entity == nullptr || id == nullptr) return CodeInvalidArgument;
  if (!entity->is_mig) return CodeNotSupported;
  *id = entity->compute_instance_id;
  return CodeSuccess;
}
#endif

// ---- test hooks (every variant) ----

/// Re-reads $VRAMSCOPE_NVML_DOUBLE_SCRIPT now (handles stay valid: they are indices). 0 on success.
VRAMSCOPE_NVML_EXPORT int vramscope_nvml_double_reload() { return state().load_from_env() ? 0 : 1; }

/// How many times the NVML function `name` was called since load or the last reset.
VRAMSCOPE_NVML_EXPORT unsigned long long vramscope_nvml_double_calls(const char* name) {
  return calls_of(name);
}

/// Sets every call counter back to zero.
VRAMSCOPE_NVML_EXPORT void vramscope_nvml_double_reset_calls() { reset_calls(); }
