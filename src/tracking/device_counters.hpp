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
  /// never blocks, allocates or throws.
  void on_event(Action action, uint64_t size_bytes) noexcept;

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
  /// raw += delta (producer only); clamps the absolute value at 0 once seeded.
  void add(std::atomic<int64_t>& raw, std::atomic<int64_t>& base, int64_t delta) noexcept;
  /// Raises each mark of `marks` to `absolute` if it is higher (CAS only when exceeded).
  static void raise(std::array<std::atomic<int64_t>, peak_mark_count>& marks,
                    int64_t absolute) noexcept;

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
