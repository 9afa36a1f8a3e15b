// src/backends/nvml_errors.cpp -- nvmlReturn_t codes turned into one clear line for the user
//
// Users meet NVML failures as "driver missing", "mismatch after an upgrade", "GPU lost" or
// "permission": each gets its own wording so that the line says what to do, with NVML's own
// text in parentheses for searching.
#include "vramscope/backends/nvml_errors.hpp"

namespace vramscope::nvml {

std::string return_name(Return code) {
  switch (code) {
    case Success:
      return "SUCCESS";
    case ErrorUninitialized:
      return "UNINITIALIZED";
    case ErrorInvalidArgument:
      return "INVALID_ARGUMENT";
    case ErrorNotSupported:
      return "NOT_SUPPORTED";
    case ErrorNoPermission:
      return "NO_PERMISSION";
    case ErrorNotFound:
      return "NOT_FOUND";
    case ErrorInsufficientSize:
      return "INSUFFICIENT_SIZE";
    case ErrorInsufficientPower:
      return "INSUFFICIENT_POWER";
    case ErrorDriverNotLoaded:
      return "DRIVER_NOT_LOADED";
    case ErrorTimeout:
      return "TIMEOUT";
    case ErrorIrqIssue:
      return "IRQ_ISSUE";
    case ErrorLibraryNotFound:
      return "LIBRARY_NOT_FOUND";
    case ErrorFunctionNotFound:
      return "FUNCTION_NOT_FOUND";
    case ErrorCorruptedInforom:
      return "CORRUPTED_INFOROM";
    case ErrorGpuIsLost:
      return "GPU_IS_LOST";
    case ErrorResetRequired:
      return "RESET_REQUIRED";
    case ErrorOperatingSystem:
      return "OPERATING_SYSTEM";
    case ErrorLibRmVersionMismatch:
      return "LIB_RM_VERSION_MISMATCH";
    case ErrorInUse:
      return "IN_USE";
    case ErrorMemory:
      return "MEMORY";
    case ErrorNoData:
      return "NO_DATA";
    case ErrorArgumentVersionMismatch:
      return "ARGUMENT_VERSION_MISMATCH";
    case ErrorDeprecated:
      return "DEPRECATED";
    case ErrorNotReady:
      return "NOT_READY";
    case ErrorGpuNotFound:
      return "GPU_NOT_FOUND";
    case ErrorUnknown:
      return "UNKNOWN";
    default:
      return "ERROR_" + std::to_string(code);
  }
}

std::string error_text(const Api& api, Return code) {
  const char* text = api.error_string != nullptr ? api.error_string(code) : nullptr;
  if (text == nullptr || text[0] == '\0') return "NVML: " + return_name(code);
  return std::string("NVML: ") + text;
}

BackendFailure init_failure_kind(Return code) {
  switch (code) {
    case ErrorDriverNotLoaded:
    case ErrorLibRmVersionMismatch:
      return BackendFailure::DriverNotLoaded;
    case ErrorNoPermission:
      return BackendFailure::NoPermission;
    default:
      return BackendFailure::Other;
  }
}

std::string init_failure_message(const Api& api, Return code) {
  const std::string nvml = " (" + error_text(api, code) + ")";
  switch (code) {
    case ErrorDriverNotLoaded:
      return "NVIDIA driver not loaded" + nvml;
    case ErrorLibRmVersionMismatch:
      return "NVIDIA driver and NVML library versions differ: reboot after a driver upgrade?" +
             nvml;
    case ErrorNoPermission:
      return "no permission to use the NVIDIA driver (check /dev/nvidia* access)" + nvml;
    case ErrorOperatingSystem:
      return "the operating system blocked access to the NVIDIA driver (cgroups or container "
             "device rules?)" +
             nvml;
    case ErrorLibraryNotFound:
      return "NVML could not find the NVIDIA driver's libraries" + nvml;
    default:
      return "NVML initialisation failed" + nvml;
  }
}

std::string device_error_message(const Api& api, Return code, std::string_view what) {
  const std::string nvml = " (" + error_text(api, code) + ")";
  const std::string subject(what);
  switch (code) {
    case ErrorGpuIsLost:
      return "GPU has fallen off the bus" + nvml;  // where we noticed it does not matter
    case ErrorNoPermission:
      return "no permission to read " + subject + nvml;
    case ErrorResetRequired:
      return "GPU needs a reset; cannot read " + subject + nvml;
    case ErrorOperatingSystem:
      return "the operating system blocked reading " + subject + nvml;
    default:
      return "cannot read " + subject + nvml;
  }
}

}  // namespace vramscope::nvml
