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
  // The agents first: where an allocator's reserved bytes moved since the last sample, the
  // driver's memory moved with them, and the backend reads it afresh rather than repeating it
  // (NvmlOptions::driver_refresh_ns). So the driver view is never older than the allocator
  // view it is joined with, and a quiet 1 kHz sample costs no driver call.
  if (m_agents) {
    m_agents->poll(out.allocators, out.steps, out.ooms);
    for (const std::string& warning : m_agents->take_warnings()) {
      if (m_on_warning) m_on_warning(warning);
    }
  }
  if (m_backend) {
    const uint64_t reserved = reserved_signature(out.allocators);
    if (reserved != m_reserved_signature) m_backend->mark_changed();
    m_reserved_signature = reserved;
    m_backend->sample_devices(out.devices);
  }
}

uint64_t reserved_signature(const std::vector<AllocatorSample>& allocators) {
  // FNV-1a over (pid, device, reserved bytes) in the reader's order (stable between polls): an
  // allocator that came, went or changed its reserved bytes changes it.
  uint64_t hash = 14695981039346656037ULL;
  const auto mix = [&hash](uint64_t value) {
    for (int shift = 0; shift < 64; shift += 8) {
      hash ^= (value >> shift) & 0xffU;
      hash *= 1099511628211ULL;
    }
  };
  mix(allocators.size());
  for (const AllocatorSample& a : allocators) {
    mix(a.pid);
    mix(static_cast<uint64_t>(static_cast<uint32_t>(a.cuda_device)));
    mix(a.reserved_bytes);
  }
  return hash;
}

}  // namespace vramscope
