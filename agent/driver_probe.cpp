// agent/driver_probe.cpp -- the driver's bytes for one pid on one GPU (see driver_probe.hpp)
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

}  // namespace vramscope::agent
