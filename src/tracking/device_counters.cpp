// src/tracking/device_counters.cpp -- event arithmetic, seeding and peak marks
#include "tracking/device_counters.hpp"

#include <algorithm>

namespace vramscope::tracking {

void DeviceCounters::on_rare_event(Action action, int64_t size) noexcept {
  switch (action) {
    case Action::SegmentAlloc:
    case Action::SegmentMap: {
      const int64_t raw = add(m_reserved_raw, m_reserved_base, size);
      raise(m_reserved_peaks, raw + m_reserved_base.load(std::memory_order_relaxed));
      break;
    }
    case Action::SegmentFree:
    case Action::SegmentUnmap:
      add(m_reserved_raw, m_reserved_base, -size);
      break;
    case Action::Unknown:
      bump(m_unknown_events, uint64_t{1});
      break;
    case Action::Alloc:
    case Action::FreeRequested:
    case Action::FreeCompleted:  // handled inline by on_event()
    case Action::Snapshot:
    case Action::Oom:
      break;
  }
}

void DeviceCounters::on_unmatched_completion() noexcept {
  m_pending_raw.store(0, std::memory_order_relaxed);
  bump(m_anomalies, uint64_t{1});
}

void DeviceCounters::clamp_to_zero(std::atomic<int64_t>& base, int64_t raw) noexcept {
  // Counted so that tests and stats() can show it happened.
  base.store(-raw, std::memory_order_relaxed);
  bump(m_anomalies, uint64_t{1});
}

bool DeviceCounters::seed(const std::function<std::optional<CounterSeed>()>& read_torch,
                          int max_attempts) {
  // The producer updates the counters and then the event count, all under the allocator's
  // lock; read_torch() takes that lock too. If the count is the same before and after it,
  // no event was in progress anywhere in between, so the raw values read here and torch's
  // values describe the same instant and their difference is the exact offset.
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const uint64_t before = m_total_events.load(std::memory_order_acquire);
    const int64_t reserved_raw = m_reserved_raw.load(std::memory_order_relaxed);
    const int64_t requested_raw = m_requested_raw.load(std::memory_order_relaxed);
    const std::optional<CounterSeed> torch = read_torch();
    if (!torch) return false;
    if (m_total_events.load(std::memory_order_acquire) != before) continue;
    m_reserved_base.store(signed_size(torch->reserved_bytes) - reserved_raw,
                          std::memory_order_relaxed);
    m_requested_base.store(signed_size(torch->requested_bytes) - requested_raw,
                           std::memory_order_relaxed);
    m_seeded.store(true, std::memory_order_release);
    // Marks collected before seeding were in delta units: restart them all. The global mark
    // starts at torch's peak so that our max_memory_* agree with torch's at attach.
    restart(PeakMark::Global);
    restart(PeakMark::Step);
    restart(PeakMark::Window);
    raise_mark(m_reserved_peaks[0], signed_size(torch->peak_reserved_bytes));
    raise_mark(m_requested_peaks[0], signed_size(torch->peak_requested_bytes));
    return true;
  }
  return false;
}

void DeviceCounters::set_polled(const CounterSeed& polled) {
  m_reserved_base.store(signed_size(polled.reserved_bytes) -
                            m_reserved_raw.load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
  m_requested_base.store(signed_size(polled.requested_bytes) -
                             m_requested_raw.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
  const bool first = !m_seeded.exchange(true, std::memory_order_acq_rel);
  if (first) {
    restart(PeakMark::Global);
    restart(PeakMark::Step);
    restart(PeakMark::Window);
  }
  raise(m_reserved_peaks, signed_size(polled.reserved_bytes));
  raise(m_requested_peaks, signed_size(polled.requested_bytes));
  // torch's peak only moves when a new high was reached since the last poll (or the user reset
  // it, after which it is a value reached since then): either way it is a value every mark has
  // lived through. The first poll's peak may predate attach, so only the global mark takes it.
  if (first) {
    raise_mark(m_reserved_peaks[0], signed_size(polled.peak_reserved_bytes));
    raise_mark(m_requested_peaks[0], signed_size(polled.peak_requested_bytes));
  } else {
    if (polled.peak_reserved_bytes != m_last_polled->peak_reserved_bytes) {
      raise(m_reserved_peaks, signed_size(polled.peak_reserved_bytes));
    }
    if (polled.peak_requested_bytes != m_last_polled->peak_requested_bytes) {
      raise(m_requested_peaks, signed_size(polled.peak_requested_bytes));
    }
  }
  m_last_polled = polled;
}

uint64_t DeviceCounters::pending_free_bytes() const {
  const int64_t v = m_pending_raw.load(std::memory_order_relaxed);
  return v > 0 ? static_cast<uint64_t>(v) : 0;
}

EventPeaks DeviceCounters::peaks(PeakMark mark) const {
  const auto index = static_cast<std::size_t>(mark);
  const int64_t reserved = m_reserved_peaks[index].load(std::memory_order_relaxed);
  const int64_t requested = m_requested_peaks[index].load(std::memory_order_relaxed);
  // A mark is never below the current value (the current value may have just been raised by
  // the producer whose CAS has not landed yet).
  return {std::max(reserved > 0 ? static_cast<uint64_t>(reserved) : 0U, reserved_bytes()),
          std::max(requested > 0 ? static_cast<uint64_t>(requested) : 0U, requested_bytes())};
}

EventPeaks DeviceCounters::restart(PeakMark mark) {
  const auto index = static_cast<std::size_t>(mark);
  const auto restart_one = [](std::atomic<int64_t>& peak, int64_t now) {
    const int64_t old = peak.exchange(now, std::memory_order_relaxed);
    return std::max(old, now);
  };
  const auto reserved_now = static_cast<int64_t>(reserved_bytes());
  const auto requested_now = static_cast<int64_t>(requested_bytes());
  EventPeaks old;
  old.reserved_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, restart_one(m_reserved_peaks[index], reserved_now)));
  old.requested_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, restart_one(m_requested_peaks[index], requested_now)));
  // An event between reading "now" and the exchange may have raised the value further; make
  // sure the new interval starts no lower than the value at its start.
  raise_mark(m_reserved_peaks[index], static_cast<int64_t>(reserved_bytes()));
  raise_mark(m_requested_peaks[index], static_cast<int64_t>(requested_bytes()));
  return old;
}

}  // namespace vramscope::tracking
