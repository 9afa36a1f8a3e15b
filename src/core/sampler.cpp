// src/core/sampler.cpp -- Sampler: driver backend + agent segments -> SystemSample
#include "vramscope/sampler.hpp"

#include <unistd.h>

#include <array>

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

}  // namespace vramscope
