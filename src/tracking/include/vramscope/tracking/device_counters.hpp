// src/tracking/include/vramscope/tracking/device_counters.hpp -- exact reserved/requested/allocated bytes of one device, from events
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
//
// Allocated bytes (torch's `allocated_bytes`, what max_memory_allocated() reports) count block
// sizes, not the requested sizes events carry. torch 2.11 (CUDACachingAllocator.cpp):
//   - a small-pool request (<= 1 MiB) always gets a block of round_size(request): 512-byte
//     multiples, at least 512 (a small block is split whenever 512 bytes or more remain);
//   - a large-pool block may keep an unsplit remainder (up to 1 MiB, more for oversize blocks
//     under max_split_size_mb, none with expandable segments) that no event reveals;
//   - ALLOC is traced before torch adds the block to its stats, FREE_REQUESTED after it took
//     the block out. So inside any callback getDeviceStats() shows every earlier event applied,
//     and a FREE_REQUESTED's own decrement too.
// Hence: small allocations and frees are pure arithmetic here. A large one reads torch's totals
// through the TotalsProbe (from inside the callback, where torch's recursive lock is already
// held): at the ALLOC (allocated and active before it), and at the device's next event, whose
// reading gives the block's true size (allocated, or active when that next event is itself a
// FREE_REQUESTED, which moved allocated but not active yet). A large FREE_REQUESTED takes
// allocated from torch directly. Every peak is then torch's own over the same interval; the
// current value is torch's after every event except between a large allocation and the next
// event (it counts the rounded request until then; a poll, observe_allocated(), covers a step
// or window that ends in that gap). Cost: a small allocation adds two adds and eight compares
// (four marks each of requested and allocated) on the peak marks' line; a large block costs
// two getDeviceStats() copies
// (~35 ns each, docs/benchmarks.md) on its allocation and one on its free.
// The ALLOC reading is also a check: if the arithmetic disagreed with torch (a rounding policy
// this file does not model, e.g. roundup_power2_divisions), the device switches to reading
// torch at every allocation and free, and the disagreement is counted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>

#include "vramscope/tracking/events.hpp"
#include "vramscope/tracking/peak_mark.hpp"

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
  uint64_t allocated_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
};

/// torch's block totals of one device at one instant, as a callback sees them.
struct AllocatorTotals {
  /// allocated_bytes.all.current: blocks handed out and not yet freed by the program.
  uint64_t allocated_bytes = 0;
  /// active_bytes.all.current: allocated blocks plus those freed but awaiting their streams.
  uint64_t active_bytes = 0;
};

/// Reads torch's totals of the device `context` stands for; false when it cannot. Called from
/// inside the tracker callback, with that device's (recursive) allocator lock held by the
/// calling thread, so it may take that lock again and must take no other.
using TotalsProbe = bool (*)(void* context, AllocatorTotals* out) noexcept;

/// The largest request torch serves from its small pool (kSmallSize): its block is always
/// round_size(request), so small blocks need no reading of torch.
inline constexpr uint64_t small_request_limit_bytes = uint64_t{1} << 20U;

/// torch's round_size() without roundup_power2_divisions: 512-byte multiples, at least 512.
constexpr uint64_t small_block_bytes(uint64_t request_bytes) {
  return request_bytes < 512 ? 512 : (request_bytes + 511) & ~uint64_t{511};
}

/// Peaks of the event-exact quantities over one interval (a mark's, a step's, a window's).
struct EventPeaks {
  uint64_t reserved_bytes = 0;
  uint64_t requested_bytes = 0;
  uint64_t allocated_bytes = 0;
};

/// Atomically maintained reserved/requested/allocated/pending-free bytes of one device.
class DeviceCounters {
 public:
  /// Applies one event. Called with the device's allocator mutex held (see file comment);
  /// never blocks, allocates or throws. Inline, as the tracker's whole hot path is (see
  /// device_producer.hpp), and laid out for the common case: a small allocation, free or
  /// completion, while no large allocation waits for its reading, is a few adds and compares
  /// in straight-line code; everything else (segments, large blocks, readings, anomalies) is one
  /// call to on_event_general(), so that its instructions stay off the lines the common case
  /// fetches (a launch-bound step evicts both between two events).
  void on_event(Action action, uint64_t size_bytes) noexcept {
    // One branch decides: bitwise, not short-circuit, so that the common case is one jump.
    const bool general = static_cast<bool>(
        static_cast<unsigned>(m_large_pending.load(std::memory_order_relaxed)) |
        static_cast<unsigned>(m_read_every_block.load(std::memory_order_relaxed)) |
        static_cast<unsigned>(size_bytes > small_request_limit_bytes) |
        static_cast<unsigned>(action > Action::FreeCompleted));
    if (general) [[unlikely]] {
      on_event_general(action, size_bytes);
      return;
    }
    const auto size = static_cast<int64_t>(size_bytes);  // at most 1 MiB here
    const auto block = static_cast<int64_t>(small_block_bytes(size_bytes));
    if (action == Action::Alloc) {
      add_requested(size);
      add_allocated(block);
    } else if (action == Action::FreeRequested) {
      free_requested(size);
      add(m_allocated_raw, m_allocated_base, -block);
    } else {
      free_completed(size);
    }
    count_event();
  }

  /// Finds absolute values: reads `read_torch` (which must take the same lock the producer
  /// runs under, as getDeviceStats does) between two reads of the event count, and retries
  /// while events slipped in between. Returns false after `max_attempts` contended tries.
  bool seed(const std::function<std::optional<CounterSeed>()>& read_torch, int max_attempts = 100);
  /// Has seed() succeeded (or set_polled() been used)? Before that, values are deltas.
  bool seeded() const { return m_seeded.load(std::memory_order_acquire); }

  /// Polling mode (no events): takes torch's current and peak values as the truth.
  void set_polled(const CounterSeed& polled);

  /// Lets large allocations and frees read torch's totals (see the file comment). Set before
  /// events flow; without a probe their allocated bytes are a lower bound (counted as unsettled).
  void set_totals_probe(TotalsProbe probe, void* context) noexcept;
  /// Raises every allocated mark to `allocated_bytes`, a value torch reported while the marks'
  /// intervals ran (a poll): it covers a large allocation no later event has settled yet.
  void observe_allocated(uint64_t allocated_bytes) noexcept;

  uint64_t reserved_bytes() const { return value(m_reserved_raw, m_reserved_base); }
  /// Segment events (alloc, free, map, unmap) seen: a pairing with the driver is settled only
  /// while this does not move (DriverPairing). Acquire: reserved_bytes() then includes them.
  uint64_t segment_event_count() const { return m_segment_events.load(std::memory_order_acquire); }

  /// A segment event in a private pool (torch's pool id is not (0, 0): a CUDA graph's, a
  /// MemPool's). The tracker calls it for those events only, besides on_event(), which counts
  /// the segment in reserved as any other. Producer only.
  void on_private_pool_event(Action action, uint64_t size_bytes) noexcept;
  /// Reserved bytes in private pools, counted from attach (a pool's segments made before attach
  /// are not seen: a free of one clamps at 0 and counts an anomaly).
  uint64_t private_pool_bytes() const {
    const int64_t v = m_private_pool_raw.load(std::memory_order_relaxed);
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }
  /// Do this device's events carry torch's pool id (torch >= 2.8)? Set once at attach.
  void set_pools_tracked(bool tracked) noexcept {
    m_pools_tracked.store(tracked, std::memory_order_relaxed);
  }
  bool pools_tracked() const { return m_pools_tracked.load(std::memory_order_relaxed); }
  uint64_t requested_bytes() const { return value(m_requested_raw, m_requested_base); }
  /// torch's allocated bytes as of the last event (a large allocation counts at its rounded
  /// request until the device's next event settles its block size).
  uint64_t allocated_bytes() const { return value(m_allocated_raw, m_allocated_base); }
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
  /// Times the small-block arithmetic disagreed with torch's totals (each switched the device
  /// to reading torch at every block), and large allocations no reading could settle.
  uint64_t allocated_mismatch_count() const {
    return m_allocated_mismatches.load(std::memory_order_relaxed);
  }
  uint64_t unsettled_count() const { return m_unsettled.load(std::memory_order_relaxed); }
  /// Does every allocation and free of this device read torch (after a mismatch)?
  bool reads_every_block() const { return m_read_every_block.load(std::memory_order_relaxed); }

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
  /// Raises one peak mark to `absolute` (CAS; another thread may restart the mark meanwhile).
  static void raise_mark(std::atomic<int64_t>& mark, int64_t absolute) noexcept {
    int64_t current = mark.load(std::memory_order_relaxed);
    while (absolute > current &&
           !mark.compare_exchange_weak(current, absolute, std::memory_order_relaxed)) {
    }
  }
  /// Raises each mark of `marks` to `absolute` if it is higher. The compares are inline; the
  /// CAS, needed only when a peak is exceeded (rare once a program reaches steady state), is not.
  static void raise(std::array<std::atomic<int64_t>, peak_mark_count>& marks,
                    int64_t absolute) noexcept {
    for (std::atomic<int64_t>& mark : marks) {
      if (absolute > mark.load(std::memory_order_relaxed)) [[unlikely]]
        raise_mark_out_of_line(mark, absolute);
    }
  }
  /// An allocation's requested bytes, with their peaks.
  void add_requested(int64_t size) noexcept {
    const int64_t raw = add(m_requested_raw, m_requested_base, size);
    raise(m_requested_peaks, raw + m_requested_base.load(std::memory_order_relaxed));
  }
  /// A block's allocated bytes, with their peaks.
  void add_allocated(int64_t block) noexcept {
    const int64_t raw = add(m_allocated_raw, m_allocated_base, block);
    raise(m_allocated_peaks, raw + m_allocated_base.load(std::memory_order_relaxed));
  }
  /// A FREE_REQUESTED's requested side: pending until completed (and requested down now, if
  /// that is the release action).
  void free_requested(int64_t size) noexcept {
    bump(m_pending_raw, size);
    if constexpr (requested_release_action == Action::FreeRequested) {
      add(m_requested_raw, m_requested_base, -size);
    }
  }
  /// A FREE_COMPLETED: no longer pending (and requested down, if that is the release action).
  void free_completed(int64_t size) noexcept {
    const int64_t pending = m_pending_raw.load(std::memory_order_relaxed) - size;
    if (pending < 0) [[unlikely]] {
      on_unmatched_completion();
    } else {
      m_pending_raw.store(pending, std::memory_order_relaxed);
    }
    if constexpr (requested_release_action == Action::FreeCompleted) {
      add(m_requested_raw, m_requested_base, -size);
    }
  }
  /// One more event seen. Release: seed() pairs this with its acquire loads to detect a
  /// concurrent event.
  void count_event() noexcept {
    m_total_events.store(m_total_events.load(std::memory_order_relaxed) + 1,
                         std::memory_order_release);
  }
  // Out of line: rare, and kept off the hot path's instruction lines.
  /// Every event on_event() does not handle inline: the same arithmetic, plus segment and
  /// unknown events and the readings of torch's totals for large blocks.
  void on_event_general(Action action, uint64_t size_bytes) noexcept;
  static void raise_mark_out_of_line(std::atomic<int64_t>& mark, int64_t absolute) noexcept;
  /// Segment, unknown, snapshot and OOM events.
  void on_rare_event(Action action, int64_t size) noexcept;
  /// A FREE_COMPLETED whose FREE_REQUESTED came before attach.
  void on_unmatched_completion() noexcept;
  /// One more segment event (after reserved moved).
  void count_segment_event() noexcept;
  /// A free took the absolute value below 0 (its allocation predates what seeding accounted
  /// for): moves the offset so that the value is 0.
  void clamp_to_zero(std::atomic<int64_t>& base, int64_t raw) noexcept;
  /// Allocated bytes from torch's totals for an event on_event() did not do by arithmetic: settles
  /// a pending allocation (its block is the growth of allocated, or of active when this event
  /// is a FREE_REQUESTED), checks the arithmetic, takes torch's value, and leaves a large
  /// allocation pending until the next event.
  void on_block_read(Action action, uint64_t size_bytes) noexcept;

  // Layout: between two events a training step evicts these from the near caches, so every
  // line the callback touches is a miss. A free touches the first line only, an allocation the
  // first two; segment and unknown events (rare) also the third, large blocks the fourth. The
  // first line is 64-aligned, not 128: DeviceProducer puts its own line (stamp, flags, recorder)
  // just before it, the two making one 128-byte pair that the L2's adjacent-line prefetcher
  // fetches as one. (Per-action counts, a line of their own, went: only the unknown count was
  // ever read.)
  alignas(64) std::atomic<int64_t> m_requested_raw{0};
  std::atomic<int64_t> m_pending_raw{0};
  std::atomic<int64_t> m_requested_base{0};
  std::atomic<int64_t> m_allocated_raw{0};
  std::atomic<int64_t> m_allocated_base{0};
  std::atomic<uint64_t> m_total_events{0};
  std::atomic<bool> m_seeded{false};
  /// Is an allocation waiting for the next event to learn its block size?
  std::atomic<bool> m_large_pending{false};
  /// Does every allocation and free read torch (the arithmetic once disagreed with torch)?
  std::atomic<bool> m_read_every_block{false};
  alignas(64) std::array<std::atomic<int64_t>, peak_mark_count> m_requested_peaks{};
  std::array<std::atomic<int64_t>, peak_mark_count> m_allocated_peaks{};
  alignas(64) std::atomic<int64_t> m_reserved_raw{0};
  std::atomic<int64_t> m_reserved_base{0};
  std::array<std::atomic<int64_t>, peak_mark_count> m_reserved_peaks{};
  std::atomic<uint64_t> m_anomalies{0};
  std::atomic<uint64_t> m_unknown_events{0};
  std::atomic<uint64_t> m_segment_events{0};
  std::atomic<int64_t> m_private_pool_raw{0};
  std::atomic<bool> m_pools_tracked{false};
  /// torch's peaks at the previous set_polled() (polling mode; called under the agent's lock).
  std::optional<CounterSeed> m_last_polled;
  // Large blocks only (producer only, besides the counts).
  alignas(64) TotalsProbe m_probe = nullptr;
  void* m_probe_context = nullptr;
  /// torch's totals just before the pending allocation.
  AllocatorTotals m_pending_before;
  std::atomic<uint64_t> m_allocated_mismatches{0};
  std::atomic<uint64_t> m_unsettled{0};
};

}  // namespace vramscope::tracking
