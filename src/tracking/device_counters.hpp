// src/tracking/device_counters.hpp -- exact reserved/requested bytes of one device, from events
//
// Updated by the trace-tracker callback, read by the agent thread and by Python callers.
//
// Producers: torch invokes trackers with the device's allocator mutex held, so at most one
// thread at a time runs on_event() for a given device, and the mutex orders successive callers
// (release on unlock, acquire on lock). Fields only the producer writes therefore use relaxed
// load + store (no locked read-modify-write); fields other threads also write (the peak marks,
// reset by the agent) use compare-and-swap. Readers on other threads only ever load.
//
// Seeding: counters start at 0 when the tracker is attached, so they count deltas. seed() then
// finds the absolute values (see device_counters.cpp) and stores an offset per counter; a value
// is `raw + base`, and each peak mark is kept in the same absolute units.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "tracking/events.hpp"

namespace vramscope::tracking {

/// The free event at which requested bytes go down. torch decreases `requested_bytes` in
/// free_block(), which emits FREE_COMPLETED (a record_stream'ed block stays "requested" until
/// its CUDA events complete); tests/gpu checks this against torch.cuda.memory_stats().
inline constexpr Action requested_release_action = Action::FreeCompleted;

/// torch's own numbers for one device at one instant (from getDeviceStats).
struct CounterSeed {
  uint64_t reserved_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t requested_bytes = 0;
  uint64_t peak_requested_bytes = 0;
};

/// Which peak a mark tracks. Each restarts independently.
enum class PeakMark : uint8_t {
  /// Since attach or the last reset_peak().
  Global = 0,
  /// Since the last step boundary.
  Step = 1,
  /// Since the agent thread last closed its time window.
  Window = 2,
};
inline constexpr std::size_t peak_mark_count = 3;

/// Peaks of the event-exact quantities over one mark's interval.
struct EventPeaks {
  uint64_t reserved_bytes = 0;
  uint64_t requested_bytes = 0;
};

/// Atomically maintained reserved/requested/pending-free bytes of one device.
class DeviceCounters {
 public:
  /// Applies one event. Called with the device's allocator mutex held (see file comment);
  /// never blocks, allocates or throws. Inline, as the tracker's whole hot path is (see
  /// device_producer.hpp): allocations and frees make no call; segment events do.
  void on_event(Action action, uint64_t size_bytes) noexcept {
    const int64_t size = signed_size(size_bytes);
    if (action == Action::Alloc) {
      const int64_t raw = add(m_requested_raw, m_requested_base, size);
      raise(m_requested_peaks, raw + m_requested_base.load(std::memory_order_relaxed));
    } else if (action == Action::FreeRequested) {
      bump(m_pending_raw, size);
      if constexpr (requested_release_action == Action::FreeRequested) {
        add(m_requested_raw, m_requested_base, -size);
      }
    } else if (action == Action::FreeCompleted) {
      const int64_t pending = m_pending_raw.load(std::memory_order_relaxed) - size;
      if (pending < 0) [[unlikely]] {
        on_unmatched_completion();
      } else {
        m_pending_raw.store(pending, std::memory_order_relaxed);
      }
      if constexpr (requested_release_action == Action::FreeCompleted) {
        add(m_requested_raw, m_requested_base, -size);
      }
    } else {
      on_rare_event(action, size);
    }
    // Release: seed() pairs this with its acquire loads to detect a concurrent event.
    m_total_events.store(m_total_events.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
  }

  /// Finds absolute values: reads `read_torch` (which must take the same lock the producer
  /// runs under, as getDeviceStats does) between two reads of the event count, and retries
  /// while events slipped in between. Returns false after `max_attempts` contended tries.
  bool seed(const std::function<std::optional<CounterSeed>()>& read_torch, int max_attempts = 100);
  /// Has seed() succeeded (or set_polled() been used)? Before that, values are deltas.
  bool seeded() const { return m_seeded.load(std::memory_order_acquire); }

  /// Polling mode (no events): takes torch's current and peak values as the truth.
  void set_polled(const CounterSeed& polled);

  uint64_t reserved_bytes() const { return value(m_reserved_raw, m_reserved_base); }
  uint64_t requested_bytes() const { return value(m_requested_raw, m_requested_base); }
  /// Freed by the program but waiting for record_stream'ed CUDA work (FREE_REQUESTED without
  /// its FREE_COMPLETED yet), in requested bytes.
  uint64_t pending_free_bytes() const;

  /// Highest values since `mark` was last restarted.
  EventPeaks peaks(PeakMark mark) const;
  /// Restarts `mark` at the current values and returns the peaks it held.
  EventPeaks restart(PeakMark mark);

  /// Events seen in all, and of actions this build does not know (counted and ignored).
  uint64_t total_event_count() const { return m_total_events.load(std::memory_order_acquire); }
  uint64_t unknown_event_count() const { return m_unknown_events.load(std::memory_order_relaxed); }
  /// Decrements that would have gone below zero (events from before attach that seeding could
  /// not account for); each was clamped to 0.
  uint64_t anomaly_count() const { return m_anomalies.load(std::memory_order_relaxed); }

 private:
  static uint64_t value(const std::atomic<int64_t>& raw, const std::atomic<int64_t>& base) {
    const int64_t v = raw.load(std::memory_order_relaxed) + base.load(std::memory_order_relaxed);
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }
  static int64_t signed_size(uint64_t size_bytes) noexcept {
    // A size above 2^63 is not a real allocation; saturate rather than wrap.
    return size_bytes > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                         : static_cast<int64_t>(size_bytes);
  }
  /// Producer-only increment: a relaxed load and store, no locked instruction (see file comment).
  template <typename T>
  static void bump(std::atomic<T>& counter, T delta) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  /// raw += delta (producer only) and returns the new raw value; clamps the absolute value at
  /// 0 once seeded.
  int64_t add(std::atomic<int64_t>& raw, std::atomic<int64_t>& base, int64_t delta) noexcept {
    const int64_t updated = raw.load(std::memory_order_relaxed) + delta;
    raw.store(updated, std::memory_order_relaxed);
    if (delta < 0 && updated + base.load(std::memory_order_relaxed) < 0 &&
        m_seeded.load(std::memory_order_acquire)) [[unlikely]] {
      clamp_to_zero(base, updated);
    }
    return updated;
  }
  /// Raises one peak mark to `absolute` if that is higher (CAS only when exceeded).
  static void raise_mark(std::atomic<int64_t>& mark, int64_t absolute) noexcept {
    int64_t current = mark.load(std::memory_order_relaxed);
    while (absolute > current &&
           !mark.compare_exchange_weak(current, absolute, std::memory_order_relaxed)) {
    }
  }
  /// Raises each mark of `marks` to `absolute` if it is higher. Writes only when a peak is
  /// exceeded, which is rare once a program reaches steady state.
  static void raise(std::array<std::atomic<int64_t>, peak_mark_count>& marks,
                    int64_t absolute) noexcept {
    for (std::atomic<int64_t>& mark : marks) raise_mark(mark, absolute);
  }
  // Out of line: rare, and kept off the hot path's instruction lines.
  /// Segment, unknown, snapshot and OOM events.
  void on_rare_event(Action action, int64_t size) noexcept;
  /// A FREE_COMPLETED whose FREE_REQUESTED came before attach.
  void on_unmatched_completion() noexcept;
  /// A free took the absolute value below 0 (its allocation predates what seeding accounted
  /// for): moves the offset so that the value is 0.
  void clamp_to_zero(std::atomic<int64_t>& base, int64_t raw) noexcept;

  // Layout: between two events a training step evicts these from the near caches, so every
  // line the callback touches is a miss. An alloc or free touches the first line only; segment
  // and unknown events (rare) also the second. (Per-action counts, a line of their own, went:
  // only the unknown count was ever read.)
  alignas(64) std::atomic<int64_t> m_requested_raw{0};
  std::atomic<int64_t> m_pending_raw{0};
  std::atomic<int64_t> m_requested_base{0};
  std::array<std::atomic<int64_t>, peak_mark_count> m_requested_peaks{};
  std::atomic<uint64_t> m_total_events{0};
  std::atomic<bool> m_seeded{false};
  alignas(64) std::atomic<int64_t> m_reserved_raw{0};
  std::atomic<int64_t> m_reserved_base{0};
  std::array<std::atomic<int64_t>, peak_mark_count> m_reserved_peaks{};
  std::atomic<uint64_t> m_anomalies{0};
  std::atomic<uint64_t> m_unknown_events{0};
  /// torch's peaks at the previous set_polled() (polling mode; called under the agent's lock).
  std::optional<CounterSeed> m_last_polled;
};

}  // namespace vramscope::tracking
