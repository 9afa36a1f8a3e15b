// src/tracking/device_counters.cpp -- event arithmetic, torch readings for large blocks, seeding, peak marks
#include "vramscope/tracking/device_counters.hpp"

#include <algorithm>

namespace vramscope::tracking {

void DeviceCounters::on_event_general(Action action, uint64_t size_bytes) noexcept {
  const int64_t size = signed_size(size_bytes);
  // Reads torch when a large allocation waits for this event to learn its block size, and
  // for large blocks (file comment); everything else is arithmetic.
  const bool block_event = action == Action::Alloc || action == Action::FreeRequested;
  const bool reads = m_large_pending.load(std::memory_order_relaxed) ||
                     (block_event && (size_bytes > small_request_limit_bytes ||
                                      m_read_every_block.load(std::memory_order_relaxed)));
  const auto block = static_cast<int64_t>(small_block_bytes(size_bytes));
  if (action == Action::Alloc) {
    add_requested(size);
    if (!reads) add_allocated(block);
  } else if (action == Action::FreeRequested) {
    free_requested(size);
    if (!reads) add(m_allocated_raw, m_allocated_base, -block);
  } else if (action == Action::FreeCompleted) {
    free_completed(size);
  } else {
    on_rare_event(action, size);
  }
  if (reads) on_block_read(action, size_bytes);
  count_event();
}

void DeviceCounters::raise_mark_out_of_line(std::atomic<int64_t>& mark, int64_t absolute) noexcept {
  raise_mark(mark, absolute);
}

void DeviceCounters::on_rare_event(Action action, int64_t size) noexcept {
  switch (action) {
    case Action::SegmentAlloc:
    case Action::SegmentMap: {
      const int64_t raw = add(m_reserved_raw, m_reserved_base, size);
      raise(m_reserved_peaks, raw + m_reserved_base.load(std::memory_order_relaxed));
      count_segment_event();
      break;
    }
    case Action::SegmentFree:
    case Action::SegmentUnmap:
      add(m_reserved_raw, m_reserved_base, -size);
      count_segment_event();
      break;
    case Action::Unknown:
      bump(m_unknown_events, uint64_t{1});
      break;
    case Action::Alloc:
    case Action::FreeRequested:
    case Action::FreeCompleted:  // handled by on_event_general()
    case Action::Snapshot:
    case Action::Oom:
      break;
  }
}

void DeviceCounters::count_segment_event() noexcept {
  // Release, after reserved moved: a reader that sees the count sees the reserved bytes too.
  m_segment_events.store(m_segment_events.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
}

void DeviceCounters::on_private_pool_event(Action action, uint64_t size_bytes) noexcept {
  const int64_t size = signed_size(size_bytes);
  const int64_t now = m_private_pool_raw.load(std::memory_order_relaxed);
  switch (action) {
    case Action::SegmentAlloc:
    case Action::SegmentMap:
      m_private_pool_raw.store(now + size, std::memory_order_relaxed);
      break;
    case Action::SegmentFree:
    case Action::SegmentUnmap:
      if (now < size) [[unlikely]] {
        // A segment of a pool made before attach.
        m_private_pool_raw.store(0, std::memory_order_relaxed);
        bump(m_anomalies, uint64_t{1});
      } else {
        m_private_pool_raw.store(now - size, std::memory_order_relaxed);
      }
      break;
    default:
      break;  // a block inside a private pool: reserved does not move
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

void DeviceCounters::set_totals_probe(TotalsProbe probe, void* context) noexcept {
  m_probe = probe;
  m_probe_context = context;
}

void DeviceCounters::on_block_read(Action action, uint64_t size_bytes) noexcept {
  const bool pending = m_large_pending.load(std::memory_order_relaxed);
  AllocatorTotals now;
  if (m_probe == nullptr || !m_probe(m_probe_context, &now)) {
    // No reading: the rounded request is the best lower bound there is.
    if (pending) bump(m_unsettled, uint64_t{1});
    m_large_pending.store(false, std::memory_order_relaxed);
    const auto block = static_cast<int64_t>(small_block_bytes(size_bytes));
    if (action == Action::Alloc) {
      if (size_bytes > small_request_limit_bytes) bump(m_unsettled, uint64_t{1});
      add_allocated(block);
    } else if (action == Action::FreeRequested) {
      add(m_allocated_raw, m_allocated_base, -block);
    }
    return;
  }
  // `now` has every earlier event applied, and a FREE_REQUESTED's own decrement (torch lowers
  // allocated before it traces the free; it raises it only after tracing an ALLOC).
  if (pending) {
    const bool by_active = action == Action::FreeRequested;
    const uint64_t after = by_active ? now.active_bytes : now.allocated_bytes;
    const uint64_t before =
        by_active ? m_pending_before.active_bytes : m_pending_before.allocated_bytes;
    if (after >= before) {
      raise(m_allocated_peaks, signed_size(m_pending_before.allocated_bytes + (after - before)));
    } else {
      bump(m_unsettled, uint64_t{1});  // torch's totals went backwards: not a reading to trust
    }
    m_large_pending.store(false, std::memory_order_relaxed);
  } else if (action == Action::Alloc && m_seeded.load(std::memory_order_relaxed) &&
             allocated_bytes() != now.allocated_bytes) {
    // The arithmetic of small blocks missed a rounding torch applied: read from now on.
    bump(m_allocated_mismatches, uint64_t{1});
    m_read_every_block.store(true, std::memory_order_relaxed);
  }
  m_allocated_raw.store(
      signed_size(now.allocated_bytes) - m_allocated_base.load(std::memory_order_relaxed),
      std::memory_order_relaxed);
  if (action == Action::Alloc) {
    // The block is at least the rounded request; the next event says how much more it kept.
    m_pending_before = now;
    m_large_pending.store(true, std::memory_order_relaxed);
    add_allocated(static_cast<int64_t>(small_block_bytes(size_bytes)));
  }
}

void DeviceCounters::observe_allocated(uint64_t allocated_bytes) noexcept {
  raise(m_allocated_peaks, signed_size(allocated_bytes));
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
    // A pending large allocation counts at its rounded request here while torch has the whole
    // block: the offset then absorbs the difference, which is harmless, because the next event's
    // reading sets allocated to torch's absolute value (and raises the marks with it).
    const int64_t allocated_raw = m_allocated_raw.load(std::memory_order_relaxed);
    const std::optional<CounterSeed> torch = read_torch();
    if (!torch) return false;
    if (m_total_events.load(std::memory_order_acquire) != before) continue;
    m_reserved_base.store(signed_size(torch->reserved_bytes) - reserved_raw,
                          std::memory_order_relaxed);
    m_requested_base.store(signed_size(torch->requested_bytes) - requested_raw,
                           std::memory_order_relaxed);
    m_allocated_base.store(signed_size(torch->allocated_bytes) - allocated_raw,
                           std::memory_order_relaxed);
    m_seeded.store(true, std::memory_order_release);
    // Marks collected before seeding were in delta units: restart them all. The global mark
    // starts at torch's peak so that our max_memory_* agree with torch's at attach.
    for (std::size_t m = 0; m < peak_mark_count; ++m) restart(static_cast<PeakMark>(m));
    raise_mark(m_reserved_peaks[0], signed_size(torch->peak_reserved_bytes));
    raise_mark(m_requested_peaks[0], signed_size(torch->peak_requested_bytes));
    raise_mark(m_allocated_peaks[0], signed_size(torch->peak_allocated_bytes));
    return true;
  }
  return false;
}

void DeviceCounters::set_polled(const CounterSeed& polled) {
  m_reserved_base.store(
      signed_size(polled.reserved_bytes) - m_reserved_raw.load(std::memory_order_relaxed),
      std::memory_order_relaxed);
  m_requested_base.store(
      signed_size(polled.requested_bytes) - m_requested_raw.load(std::memory_order_relaxed),
      std::memory_order_relaxed);
  m_allocated_base.store(
      signed_size(polled.allocated_bytes) - m_allocated_raw.load(std::memory_order_relaxed),
      std::memory_order_relaxed);
  const bool first = !m_seeded.exchange(true, std::memory_order_acq_rel);
  if (first) {
    for (std::size_t m = 0; m < peak_mark_count; ++m) restart(static_cast<PeakMark>(m));
  }
  raise(m_reserved_peaks, signed_size(polled.reserved_bytes));
  raise(m_requested_peaks, signed_size(polled.requested_bytes));
  raise(m_allocated_peaks, signed_size(polled.allocated_bytes));
  // torch's peak only moves when a new high was reached since the last poll (or the user reset
  // it, after which it is a value reached since then): either way it is a value every mark has
  // lived through. The first poll's peak may predate attach, so only the global mark takes it.
  if (first) {
    raise_mark(m_reserved_peaks[0], signed_size(polled.peak_reserved_bytes));
    raise_mark(m_requested_peaks[0], signed_size(polled.peak_requested_bytes));
    raise_mark(m_allocated_peaks[0], signed_size(polled.peak_allocated_bytes));
  } else {
    if (polled.peak_reserved_bytes != m_last_polled->peak_reserved_bytes) {
      raise(m_reserved_peaks, signed_size(polled.peak_reserved_bytes));
    }
    if (polled.peak_requested_bytes != m_last_polled->peak_requested_bytes) {
      raise(m_requested_peaks, signed_size(polled.peak_requested_bytes));
    }
    if (polled.peak_allocated_bytes != m_last_polled->peak_allocated_bytes) {
      raise(m_allocated_peaks, signed_size(polled.peak_allocated_bytes));
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
  const int64_t allocated = m_allocated_peaks[index].load(std::memory_order_relaxed);
  // A mark is never below the current value (the current value may have just been raised by
  // the producer whose CAS has not landed yet).
  return {std::max(reserved > 0 ? static_cast<uint64_t>(reserved) : 0U, reserved_bytes()),
          std::max(requested > 0 ? static_cast<uint64_t>(requested) : 0U, requested_bytes()),
          std::max(allocated > 0 ? static_cast<uint64_t>(allocated) : 0U, allocated_bytes())};
}

EventPeaks DeviceCounters::restart(PeakMark mark) {
  const auto index = static_cast<std::size_t>(mark);
  const auto restart_one = [](std::atomic<int64_t>& peak, int64_t now) {
    const int64_t old = peak.exchange(now, std::memory_order_relaxed);
    return std::max(old, now);
  };
  const auto reserved_now = static_cast<int64_t>(reserved_bytes());
  const auto requested_now = static_cast<int64_t>(requested_bytes());
  const auto allocated_now = static_cast<int64_t>(allocated_bytes());
  EventPeaks old;
  old.reserved_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, restart_one(m_reserved_peaks[index], reserved_now)));
  old.requested_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, restart_one(m_requested_peaks[index], requested_now)));
  old.allocated_bytes = static_cast<uint64_t>(
      std::max<int64_t>(0, restart_one(m_allocated_peaks[index], allocated_now)));
  // An event between reading "now" and the exchange may have raised the value further; make
  // sure the new interval starts no lower than the value at its start.
  raise_mark(m_reserved_peaks[index], static_cast<int64_t>(reserved_bytes()));
  raise_mark(m_requested_peaks[index], static_cast<int64_t>(requested_bytes()));
  raise_mark(m_allocated_peaks[index], static_cast<int64_t>(allocated_bytes()));
  return old;
}

}  // namespace vramscope::tracking
