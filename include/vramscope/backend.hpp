// include/vramscope/backend.hpp -- where device samples come from
//
// A DeviceBackend is the driver view: the NVML backend on a real machine. Layers above never
// call NVML themselves; they ask a backend for a sample and ignore where it came from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "vramscope/sample.hpp"

namespace vramscope {

/// Why a backend could not start. Each maps to one line for the user and exit code 3 or 1.
enum class BackendFailure {
  None,
  /// libnvidia-ml.so.1 (or VRAMSCOPE_NVML_LIBRARY) could not be dlopen'ed.
  LibraryNotFound,
  /// The library loaded but lacks a symbol we cannot do without (nvmlInit, GetCount…).
  MissingSymbol,
  /// NVML_ERROR_DRIVER_NOT_LOADED / LIB_RM_VERSION_MISMATCH: no usable kernel driver.
  DriverNotLoaded,
  /// NVML_ERROR_NO_PERMISSION at init.
  NoPermission,
  /// The driver works but reports zero GPUs.
  NoDevices,
  /// Anything else; the message says what.
  Other,
};

/// A source of device samples.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// Short name shown in diagnostics, e.g. "nvml".
  virtual std::string name() const = 0;
  /// Driver version string, e.g. "580.159.03"; empty when unknown.
  virtual std::string driver_version() const = 0;
  /// Number of devices the backend enumerates (including lost ones).
  virtual unsigned device_count() const = 0;
  /// Replaces the content of `out` with one sample per device, reusing its buffers (callers
  /// pass the previous sample back in; it is not cleared first). Per-device failures (a lost GPU, a
  /// field that is not supported) are recorded in that DeviceSample and never abort the others.
  virtual void sample_devices(std::vector<DeviceSample>& out) = 0;
  /// Says that what the driver reports may have changed (an allocator's reserved bytes moved):
  /// the next sample_devices() reads afresh what a backend repeats between its readings.
  virtual void mark_changed() {}
};

/// Result of opening a backend: either a backend or a failure with a one-line message.
struct BackendOpenResult {
  std::unique_ptr<DeviceBackend> backend;
  BackendFailure failure = BackendFailure::None;
  /// One line for the user, e.g. "NVIDIA driver not loaded (NVML: Driver Not Loaded)".
  std::string message;
};

}  // namespace vramscope
