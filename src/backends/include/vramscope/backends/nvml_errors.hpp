// src/backends/include/vramscope/backends/nvml_errors.hpp -- nvmlReturn_t codes turned into one clear line for the user
#pragma once

#include <string>
#include <string_view>

#include "vramscope/backend.hpp"
#include "vramscope/backends/nvml_api.hpp"

namespace vramscope::nvml {

/// The NVML_ERROR_* name of `code` without the prefix ("GPU_IS_LOST"), or "ERROR_<n>".
std::string return_name(Return code);

/// "NVML: <nvmlErrorString text>" (or the code's name when the library has no nvmlErrorString).
std::string error_text(const Api& api, Return code);

/// Which BackendFailure an nvmlInit failure is (DRIVER_NOT_LOADED → DriverNotLoaded, …).
BackendFailure init_failure_kind(Return code);

/// One line explaining a failed nvmlInit, e.g. "NVIDIA driver not loaded (NVML: Driver Not
/// Loaded)" or, after a driver upgrade, "… version mismatch: reboot after a driver upgrade? …".
std::string init_failure_message(const Api& api, Return code);

/// One line for a failed per-device call: `what` is the quantity that could not be read
/// ("memory", "process list"), e.g. "no permission to read memory (NVML: Insufficient
/// Permissions)"; a lost GPU is "GPU has fallen off the bus (NVML: GPU is lost)".
std::string device_error_message(const Api& api, Return code, std::string_view what);

}  // namespace vramscope::nvml
