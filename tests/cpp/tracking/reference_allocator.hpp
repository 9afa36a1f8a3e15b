// tests/cpp/tracking/reference_allocator.hpp -- a reference model of torch's caching allocator
//
// Generates random but self-consistent event streams (segments, mapped ranges, allocations,
// record_stream-deferred frees, empty_cache, unknown actions) and keeps torch's own counters
// (reserved/requested current and peak) the way torch does, so tests can compare the tracking
// core's numbers with the truth after every event. Like torch, it emits events while holding a
// per-device mutex, and lets readers take that mutex to read its counters.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <vector>

#include "tracking/device_counters.hpp"
#include "tracking/events.hpp"

namespace vramscope::tracking::testing {

class ReferenceAllocator {
 public:
  using Sink = std::function<void(Action action, uint64_t size_bytes, uint8_t raw_action)>;

  ReferenceAllocator(uint64_t seed, bool expandable) : m_rng(seed), m_expandable(expandable) {}

  /// Where events go (nothing before attach: events before it are "missed").
  void attach(Sink sink) {
    std::lock_guard lock(m_mutex);
    m_sink = std::move(sink);
  }

  /// One random operation; returns the number of events emitted.
  int random_operation() {
    std::lock_guard lock(m_mutex);
    const uint64_t dice = m_rng() % 100;
    if (dice < 45 || m_live.empty()) return allocate();
    if (dice < 75) return free_one(/*deferred=*/m_rng() % 4 == 0);
    if (dice < 88) return complete_pending();
    if (dice < 94) return empty_cache();
    if (dice < 97) return emit(Action::Unknown, m_rng() % 1000, static_cast<uint8_t>(9 + m_rng() % 5));
    return emit(m_rng() % 2 ? Action::Snapshot : Action::Oom, m_rng() % 4096, 0);
  }

  /// torch's counters, read under the allocator's lock like getDeviceStats.
  CounterSeed stats() {
    std::lock_guard lock(m_mutex);
    return m_truth;
  }
  uint64_t pending_bytes() {
    std::lock_guard lock(m_mutex);
    return m_pending_bytes;
  }
  /// Runs `fn` under the allocator lock (emulates a caller inside torch).
  template <typename Fn>
  void locked(Fn fn) {
    std::lock_guard lock(m_mutex);
    fn();
  }
  /// One allocation (always at least one event), under the lock.
  int allocate_locked() {
    std::lock_guard lock(m_mutex);
    return allocate();
  }
  /// Emits one event under the lock (for hand-written sequences).
  void emit_locked(Action action, uint64_t size_bytes) {
    std::lock_guard lock(m_mutex);
    emit(action, size_bytes, static_cast<uint8_t>(action));
  }

 private:
  int emit(Action action, uint64_t size, uint8_t raw) {
    if (m_sink) m_sink(action, size, raw);
    return 1;
  }

  void add_reserved(int64_t delta) {
    m_truth.reserved_bytes = static_cast<uint64_t>(static_cast<int64_t>(m_truth.reserved_bytes) + delta);
    m_truth.peak_reserved_bytes = std::max(m_truth.peak_reserved_bytes, m_truth.reserved_bytes);
  }
  void add_requested(int64_t delta) {
    m_truth.requested_bytes =
        static_cast<uint64_t>(static_cast<int64_t>(m_truth.requested_bytes) + delta);
    m_truth.peak_requested_bytes = std::max(m_truth.peak_requested_bytes, m_truth.requested_bytes);
  }

  int allocate() {
    int events = 0;
    const uint64_t size = 1 + m_rng() % (1U << 22U);
    if (m_cached_free < size) {
      // New segment (or mapped range): rounded to 2 MiB like torch's small/large pools.
      const uint64_t segment = ((size + (2U << 20U) - 1) / (2U << 20U)) * (2U << 20U);
      events += emit(m_expandable ? Action::SegmentMap : Action::SegmentAlloc, segment,
                     m_expandable ? 5 : 3);
      add_reserved(static_cast<int64_t>(segment));
      m_segments.push_back(segment);
      m_cached_free += segment;
    }
    m_cached_free -= size;
    m_live.push_back(size);
    add_requested(static_cast<int64_t>(size));
    events += emit(Action::Alloc, size, 0);
    return events;
  }

  int free_one(bool deferred) {
    const std::size_t index = m_rng() % m_live.size();
    const uint64_t size = m_live[index];
    m_live.erase(m_live.begin() + static_cast<std::ptrdiff_t>(index));
    int events = emit(Action::FreeRequested, size, 1);
    m_pending_bytes += size;
    if (deferred) {
      m_pending.push_back(size);
      return events;
    }
    return events + finish_free(size);
  }

  int finish_free(uint64_t size) {
    m_pending_bytes -= size;
    m_cached_free += size;
    if (tracking::requested_release_action == Action::FreeCompleted) {
      add_requested(-static_cast<int64_t>(size));
    }
    return emit(Action::FreeCompleted, size, 2);
  }

  int complete_pending() {
    int events = 0;
    for (uint64_t size : m_pending) events += finish_free(size);
    m_pending.clear();
    return events;
  }

  int empty_cache() {
    // Releases whole segments while the cache holds enough free bytes (a simplification of
    // torch: free bytes are fungible here, which is all counter arithmetic needs).
    int events = 0;
    while (!m_segments.empty() && m_cached_free >= m_segments.back()) {
      const uint64_t segment = m_segments.back();
      m_segments.pop_back();
      m_cached_free -= segment;
      add_reserved(-static_cast<int64_t>(segment));
      events += emit(m_expandable ? Action::SegmentUnmap : Action::SegmentFree, segment,
                     m_expandable ? 6 : 4);
    }
    return events;
  }

  std::mutex m_mutex;
  std::mt19937_64 m_rng;
  bool m_expandable;
  Sink m_sink;
  CounterSeed m_truth;
  std::vector<uint64_t> m_live;
  std::vector<uint64_t> m_pending;
  std::vector<uint64_t> m_segments;
  uint64_t m_cached_free = 0;
  uint64_t m_pending_bytes = 0;
};

}  // namespace vramscope::tracking::testing
