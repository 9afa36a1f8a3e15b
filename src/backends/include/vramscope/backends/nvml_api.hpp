// src/backends/include/vramscope/backends/nvml_api.hpp -- our own minimal NVML declarations: codes, structs, function table
//
// nvml.h is never included: declaring the few types we use keeps the build free of the driver
// and of the CUDA toolkit, and lets us resolve each entry point at run time with dlsym. Layouts
// follow the NVML API 13 header; sizes are for x86-64/aarch64 (LP64) and include padding.
#pragma once

#include <cstdint>

namespace vramscope::nvml {

/// nvmlReturn_t: NVML returns a plain C enum (an int) from every call.
using Return = int;

/// Return codes we handle by name (NVML API 13 numbering).
enum ReturnCode : Return {
  Success = 0,
  ErrorUninitialized = 1,
  ErrorInvalidArgument = 2,
  ErrorNotSupported = 3,
  ErrorNoPermission = 4,
  ErrorNotFound = 6,
  ErrorInsufficientSize = 7,
  ErrorInsufficientPower = 8,
  ErrorDriverNotLoaded = 9,
  ErrorTimeout = 10,
  ErrorIrqIssue = 11,
  ErrorLibraryNotFound = 12,
  ErrorFunctionNotFound = 13,
  ErrorCorruptedInforom = 14,
  ErrorGpuIsLost = 15,
  ErrorResetRequired = 16,
  ErrorOperatingSystem = 17,
  ErrorLibRmVersionMismatch = 18,
  ErrorInUse = 19,
  ErrorMemory = 20,
  ErrorNoData = 21,
  ErrorArgumentVersionMismatch = 25,
  ErrorDeprecated = 26,
  ErrorNotReady = 27,
  ErrorGpuNotFound = 28,
  ErrorUnknown = 999,
};

/// nvmlDevice_t: an opaque pointer owned by the library (a GPU or a MIG device handle).
using Device = struct NvmlDeviceOpaque*;

/// NVML_VALUE_NOT_AVAILABLE as an unsigned long long: "the driver cannot tell" (e.g. WDDM).
inline constexpr uint64_t value_not_available = ~0ULL;
/// GPU/compute instance id of a process that does not run in a MIG instance.
inline constexpr uint32_t no_instance_id = 0xFFFFFFFFU;
/// NVML_DEVICE_NAME_V2_BUFFER_SIZE / NVML_DEVICE_UUID_V2_BUFFER_SIZE.
inline constexpr unsigned name_buffer_size = 96;
/// NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE.
inline constexpr unsigned driver_version_buffer_size = 80;
/// nvmlDeviceGetMigMode's "enabled" value (NVML_DEVICE_MIG_ENABLE).
inline constexpr unsigned mig_enabled = 1;

/// nvmlMemory_t (v1): `used` includes the driver's reserved memory, so total = free + used.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(Memory) == 24);

/// nvmlMemory_v2_t: `used` excludes `reserved`; total ≈ reserved + used + free.
struct MemoryV2 {
  /// Must be memory_v2_version, not the literal 2 the header comment suggests.
  unsigned version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(MemoryV2) == 40);

/// NVML_STRUCT_VERSION(Memory, 2): the struct size in the low bits, the version in the top byte.
/// Passing a bare 2 makes the driver answer FUNCTION_NOT_FOUND (NVIDIA/nvidia-settings#78).
inline constexpr unsigned memory_v2_version = static_cast<unsigned>(sizeof(MemoryV2)) | (2U << 24U);
static_assert(memory_v2_version == 0x02000028U);

/// nvmlProcessInfo_v1_t: what the unversioned Get*RunningProcesses fill.
struct ProcessInfoV1 {
  unsigned pid;
  unsigned long long usedGpuMemory;
};
static_assert(sizeof(ProcessInfoV1) == 16);

/// nvmlProcessInfo_t (v2 layout): what the _v2 and _v3 Get*RunningProcesses fill.
struct ProcessInfo {
  unsigned pid;
  unsigned long long usedGpuMemory;
  /// no_instance_id without MIG.
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};
static_assert(sizeof(ProcessInfo) == 24);

/// nvmlPciInfo_t as filled by GetPciInfo_v3. The older calls fill only the first 36 bytes
/// (legacy bus id and numbers), which is why we format the bus id from the numbers there.
struct PciInfo {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(PciInfo) == 68);

/// nvmlBAR1Memory_t.
struct Bar1Memory {
  unsigned long long bar1Total;
  unsigned long long bar1Free;
  unsigned long long bar1Used;
};
static_assert(sizeof(Bar1Memory) == 24);

/// Which version of a versioned entry point was resolved (0 = the unversioned name).
using SymbolVersion = int;

/// One Get*RunningProcesses entry point and the element layout it fills.
struct ProcessListCall {
  Return (*fn)(Device, unsigned*, void*) = nullptr;
  /// 3 or 2: elements are ProcessInfo (24 B); 0 (unversioned): elements are ProcessInfoV1 (16 B).
  SymbolVersion version = 0;
};

/// Every NVML entry point vramscope calls, resolved once by load_nvml(). A null pointer means
/// the library does not export the symbol; only the mandatory ones are guaranteed non-null.
struct Api {
  // Mandatory.
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  Return (*device_get_count)(unsigned*) = nullptr;
  Return (*device_get_handle_by_index)(unsigned, Device*) = nullptr;

  // Optional: a missing one leaves its fields empty.
  const char* (*error_string)(Return) = nullptr;
  Return (*system_get_driver_version)(char*, unsigned) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned) = nullptr;
  Return (*device_get_uuid)(Device, char*, unsigned) = nullptr;
  Return (*device_get_pci_info)(Device, PciInfo*) = nullptr;
  /// 3 when GetPciInfo_v3 was found (busId is filled), else 2 or 0.
  SymbolVersion pci_info_version = 0;
  Return (*device_get_memory_info)(Device, Memory*) = nullptr;
  Return (*device_get_memory_info_v2)(Device, MemoryV2*) = nullptr;
  Return (*device_get_bar1_memory_info)(Device, Bar1Memory*) = nullptr;
  /// The three process lists, each resolved newest first on its own.
  ProcessListCall compute_processes;
  ProcessListCall graphics_processes;
  ProcessListCall mps_processes;
  Return (*device_get_mig_mode)(Device, unsigned*, unsigned*) = nullptr;
  Return (*device_get_max_mig_device_count)(Device, unsigned*) = nullptr;
  Return (*device_get_mig_device_handle_by_index)(Device, unsigned, Device*) = nullptr;
  Return (*device_get_gpu_instance_id)(Device, unsigned*) = nullptr;
  Return (*device_get_compute_instance_id)(Device, unsigned*) = nullptr;
};

}  // namespace vramscope::nvml
