// src/attribution/session.cpp -- profile start/stop, ledger holds and the step annotation (see session.hpp)
#include "vramscope/attribution/session.hpp"

#include <stdexcept>

namespace vramscope::attribution {

AttributionSession::AttributionSession(tracking::AgentCore& core, OpSwitch& ops)
    : m_core(core), m_ops(ops), m_attributor(core.device_count()) {
  core.set_event_consumer([this](std::size_t device, const std::vector<tracking::Event>& events) {
    m_attributor.consume(device, events);
  });
  // Runs inside AgentCore::step() with the core's lock held and the device's events drained:
  // the breakdown at the step's peak and the restart of that peak happen at the same instant
  // as the step's other peaks.
  core.set_step_annotator([this](std::size_t device) { return step_annotation(device); });
}

std::optional<CategoryBytes> AttributionSession::step_annotation(std::size_t device) {
  if (m_step_category_holds.load(std::memory_order_acquire) == 0 || !m_attributor.active()) {
    return std::nullopt;
  }
  std::optional<CategoryBytes> out;
  m_attributor.with_ledger(device, [&](Ledger& ledger) {
    out = category_bytes_at_peak(ledger.categories(PeakMark::Step));
    ledger.restart_peak(PeakMark::Step);
  });
  return out;
}

void AttributionSession::acquire_locked_stream() {
  // Events reach the ring (and the ledgers) only while streaming; outside attribution they go to
  // the counters and the recorder alone, which keeps the callback off other cores' caches.
  // Flipped under the core's lock, like release(): the two cannot interleave.
  m_core.set_streaming(true);
  std::vector<uint64_t> live;
  live.reserve(m_core.device_count());
  for (std::size_t d = 0; d < m_core.device_count(); ++d) {
    live.push_back(m_core.counters(d).requested_bytes());
  }
  m_attributor.acquire(live);
}

void AttributionSession::acquire() {
  m_core.flush([this] { acquire_locked_stream(); });
}

void AttributionSession::release() {
  m_core.flush([this] {
    if (m_attributor.release() && !m_attributor.active()) m_core.set_streaming(false);
  });
}

void AttributionSession::start_profile(double sampling) {
  if (!(sampling > 0.0) || sampling > 1.0) {
    throw std::invalid_argument("sampling must be in (0, 1]");
  }
  std::lock_guard lock(m_profile_mutex);
  if (m_profiling) throw std::runtime_error("a vramscope.profile() is already running");
  m_ops.enable(sampling);
  m_core.set_op_tracking(true);
  m_profiling = true;
  m_calls_at_start = m_registry.call_counts();
  m_core.flush([this] {
    acquire_locked_stream();
    for (std::size_t d = 0; d < m_attributor.device_count(); ++d) {
      m_attributor.with_ledger(d, [](Ledger& ledger) { ledger.restart_peak(PeakMark::Profile); });
    }
  });
  m_core.restart_profile_peaks();
}

void AttributionSession::stop_profile() {
  std::lock_guard lock(m_profile_mutex);
  if (!m_profiling) return;
  m_ops.disable();
  m_core.set_op_tracking(false);
  m_profiling = false;
  release();
}

bool AttributionSession::profiling() const {
  std::lock_guard lock(m_profile_mutex);
  return m_profiling;
}

void AttributionSession::hold_step_categories(bool hold) {
  if (hold) {
    m_step_category_holds.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  int holds = m_step_category_holds.load(std::memory_order_acquire);
  while (holds > 0 && !m_step_category_holds.compare_exchange_weak(holds, holds - 1,
                                                                   std::memory_order_acq_rel)) {
  }
}

bool AttributionSession::with_ledger(std::size_t device, const std::function<void(Ledger&)>& fn) {
  bool found = false;
  m_core.flush([&] { found = m_attributor.with_ledger(device, fn); });
  return found;
}

std::vector<uint64_t> AttributionSession::calls_since_profile_start() const {
  std::vector<uint64_t> calls = m_registry.call_counts();
  std::lock_guard lock(m_profile_mutex);
  for (std::size_t id = 0; id < calls.size() && id < m_calls_at_start.size(); ++id) {
    calls[id] -= m_calls_at_start[id];
  }
  return calls;
}

}  // namespace vramscope::attribution
