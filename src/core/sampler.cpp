// src/core/sampler.cpp -- Sampler: driver backend + agent segments -> SystemSample
#include "vramscope/sampler.hpp"

#include <unistd.h>

#include <array>
#include <exception>

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
  out.devices.clear();
  out.allocators.clear();
  out.steps.clear();
  out.ooms.clear();
  if (m_backend) m_backend->sample_devices(out.devices);
  if (m_agents) m_agents->poll(out.allocators, out.steps, out.ooms);
}

Error backend_open_error(BackendFailure failure, const std::string& message) {
  const std::string detail = message.empty() ? std::string("unknown reason") : message;
  switch (failure) {
    case BackendFailure::LibraryNotFound:
      return Error("no NVIDIA driver: " + detail +
                       " (set VRAMSCOPE_NVML_LIBRARY to use another NVML)",
                   ExitNoGpu);
    case BackendFailure::DriverNotLoaded:
      return Error("no NVIDIA driver: " + detail, ExitNoGpu);
    case BackendFailure::NoDevices:
      return Error("no GPU: " + detail, ExitNoGpu);
    case BackendFailure::MissingSymbol:
      return Error("unusable NVML library: " + detail +
                       " (set VRAMSCOPE_NVML_LIBRARY to use another NVML)",
                   ExitNoGpu);
    case BackendFailure::NoPermission:
      return Error("no permission to use NVML: " + detail, ExitError);
    case BackendFailure::None:
    case BackendFailure::Other:
      break;
  }
  return Error("cannot read GPUs: " + detail, ExitError);
}

std::unique_ptr<Sampler> open_sampler(const SamplerOptions& options) {
  BackendOpenResult opened = open_nvml_backend(options.nvml);
  if (!opened.backend) {
    throw backend_open_error(
        opened.failure == BackendFailure::None ? BackendFailure::Other : opened.failure,
        opened.message);
  }
  std::unique_ptr<AgentSegmentReader> agents;
  if (options.read_agents) {
    // A missing or unreadable segment directory only means "no agents": the driver view
    // still stands on its own.
    try {
      agents = AgentSegmentReader::create(options.agent_dir);
    } catch (const std::exception&) {
      agents.reset();
    }
  }
  return std::make_unique<Sampler>(std::move(opened.backend), std::move(agents));
}

}  // namespace vramscope
