// agent/driver_probe.cpp -- the driver's bytes for one pid on one GPU, and the driver's side of a pairing (see driver_probe.hpp)
#include "driver_probe.hpp"

namespace vramscope::agent {

std::optional<uint64_t> DriverProbe::process_bytes(const std::string& uuid, uint32_t pid) {
  std::lock_guard lock(m_mutex);
  if (!m_opened) {
    m_opened = true;
    m_probe = nvml::ProcessMemoryProbe::open("", m_error);
  }
  if (!m_probe) return std::nullopt;
  return m_probe->used_bytes(uuid, pid);
}

std::string DriverProbe::error() {
  std::lock_guard lock(m_mutex);
  return m_error;
}

std::optional<uint64_t> AgentDriverSource::process_bytes(std::size_t device) {
  if (device >= m_uuids.size() || m_uuids[device].empty()) return std::nullopt;
  return m_probe.process_bytes(m_uuids[device], m_pid);
}

std::optional<uint64_t> AgentDriverSource::allocation_bytes(std::size_t device) {
  return m_allocations.bytes(static_cast<int>(device));
}

}  // namespace vramscope::agent
