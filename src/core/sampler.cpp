// src/core/sampler.cpp -- Sampler: driver backend + agent segments -> SystemSample
#include "vramscope/sampler.hpp"

#include <unistd.h>

#include <array>
#include <cstdlib>

#include "vramscope/clock.hpp"

namespace vramscope {

std::string local_hostname() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return {};
  return std::string(name.data());
}

Sampler::Sampler(std::unique_ptr<DeviceBackend> backend, std::unique_ptr<AgentSegmentReader> agents)
    : m_backend(std::move(backend)), m_agents(std::move(agents)), m_hostname(local_hostname()) {
  if (m_backend) m_driver_version = m_backend->driver_version();
}

void Sampler::sample(SystemSample& out) {
  out.timestamp_ns = wall_time_ns();
  out.hostname = m_hostname;
  out.driver_version = m_driver_version;
  // Devices are not cleared: the backend replaces them in place, reusing the strings and
  // process vectors of the previous sample (no allocation churn at 1 kHz).
  out.allocators.clear();
  out.steps.clear();
  out.ooms.clear();
  if (m_backend) m_backend->sample_devices(out.devices);
  if (m_agents) {
    m_agents->poll(out.allocators, out.steps, out.ooms);
    for (const std::string& warning : m_agents->take_warnings()) {
      if (m_on_warning) m_on_warning(warning);
    }
  }
}

namespace {

/// `message` led by `prefix` unless it already says what kind of failure it is.
std::string led_by(const std::string& prefix, const std::string& message, const char* keyword) {
  if (message.find(keyword) != std::string::npos) return message;
  return prefix + message;
}

/// Where to look next when no library could be loaded.
std::string library_hint() {
  const char* configured = std::getenv("VRAMSCOPE_NVML_LIBRARY");
  if (configured != nullptr && configured[0] != '\0') return " (from VRAMSCOPE_NVML_LIBRARY)";
  return " (set VRAMSCOPE_NVML_LIBRARY to use another NVML)";
}

}  // namespace

Error backend_open_error(BackendFailure failure, const std::string& message) {
  const std::string detail = message.empty() ? std::string("unknown reason") : message;
  switch (failure) {
    case BackendFailure::LibraryNotFound:
      return Error(led_by("no NVIDIA driver: ", detail, "driver") + library_hint(), ExitNoGpu);
    case BackendFailure::DriverNotLoaded:
      return Error(led_by("no NVIDIA driver: ", detail, "driver"), ExitNoGpu);
    case BackendFailure::NoDevices:
      return Error(led_by("no GPU: ", detail, "GPU"), ExitNoGpu);
    case BackendFailure::MissingSymbol:
      return Error("unusable NVML library: " + detail + library_hint(), ExitNoGpu);
    case BackendFailure::NoPermission:
      return Error("no permission to use NVML: " + detail, ExitError);
    case BackendFailure::None:
    case BackendFailure::Other:
      break;
  }
  return Error("cannot read GPUs: " + detail, ExitError);
}

}  // namespace vramscope
