// src/attribution/attributor.cpp -- hold counting and locked access to the ledgers
#include "vramscope/attribution/attributor.hpp"

namespace vramscope::attribution {

Attributor::Attributor(std::size_t device_count) : m_device_count(device_count) {}

void Attributor::consume(std::size_t device, const std::vector<tracking::Event>& events) {
  std::lock_guard lock(m_mutex);
  if (m_holds == 0 || device >= m_ledgers.size()) return;
  Ledger& ledger = *m_ledgers[device];
  for (const tracking::Event& event : events) ledger.on_event(event);
}

bool Attributor::acquire(const std::vector<uint64_t>& live_before_bytes) {
  std::lock_guard lock(m_mutex);
  if (m_holds++ > 0) return false;
  m_ledgers.clear();
  for (std::size_t d = 0; d < m_device_count; ++d) {
    m_ledgers.push_back(
        std::make_unique<Ledger>(d < live_before_bytes.size() ? live_before_bytes[d] : 0));
  }
  return true;
}

bool Attributor::release() {
  std::lock_guard lock(m_mutex);
  if (m_holds == 0) return false;
  --m_holds;
  return true;
}

bool Attributor::active() const {
  std::lock_guard lock(m_mutex);
  return m_holds > 0;
}

bool Attributor::has_ledgers() const {
  std::lock_guard lock(m_mutex);
  return !m_ledgers.empty();
}

bool Attributor::with_ledger(std::size_t device, const std::function<void(Ledger&)>& fn) {
  std::lock_guard lock(m_mutex);
  if (device >= m_ledgers.size()) return false;
  fn(*m_ledgers[device]);
  return true;
}

}  // namespace vramscope::attribution
