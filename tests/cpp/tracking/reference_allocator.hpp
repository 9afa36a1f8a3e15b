// tests/cpp/tracking/reference_allocator.hpp -- a block-level reference model of torch's caching allocator
//
// Generates random but self-consistent event streams the way torch 2.11's
// CUDACachingAllocator.cpp produces them, down to the blocks: round_size() (512-byte multiples,
// optionally roundup_power2_divisions), small (<= 1 MiB, 2 MiB segments) and large pools (20 MiB
// segments below 10 MiB, else 2 MiB multiples), best-fit reuse of free blocks, splitting only
// when enough remains (512 B in the small pool and with expandable segments, more than 1 MiB in
// the large pool, so large blocks keep unsplit remainders), max_split_size_mb's oversize rules,
// merging freed blocks with free neighbours of the same segment, record_stream-deferred frees,
// empty_cache of wholly free segments, and unknown actions. It keeps torch's counters the way
// torch does, including the order that matters to an observer: an ALLOC is traced *before*
// allocated/active grow, a FREE_REQUESTED *after* allocated shrank. Like torch, it emits events
// while holding a per-device recursive mutex, and lets readers (also a callback) take it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "vramscope/tracking/device_counters.hpp"
#include "vramscope/tracking/events.hpp"

namespace vramscope::tracking::testing {

/// Allocator settings the model reproduces (PYTORCH_CUDA_ALLOC_CONF).
struct ReferenceSettings {
  /// expandable_segments:True (mapped ranges instead of segments; blocks always split).
  bool expandable = false;
  /// max_split_size_mb, in bytes (no limit by default).
  uint64_t max_split_size_bytes = UINT64_MAX;
  /// roundup_power2_divisions for every size (0: plain 512-byte rounding).
  uint64_t power2_divisions = 0;
  /// Largest request of the random stream.
  uint64_t max_request_bytes = uint64_t{48} << 20U;
};

class ReferenceAllocator {
 public:
  using Sink =
      std::function<void(Action action, uint64_t size_bytes, uint64_t address, uint8_t raw_action)>;

  static constexpr uint64_t kMinBlock = 512;
  static constexpr uint64_t kSmallSize = uint64_t{1} << 20U;
  static constexpr uint64_t kSmallBuffer = uint64_t{2} << 20U;
  static constexpr uint64_t kLargeBuffer = uint64_t{20} << 20U;
  static constexpr uint64_t kMinLargeAlloc = uint64_t{10} << 20U;
  static constexpr uint64_t kRoundLarge = uint64_t{2} << 20U;

  ReferenceAllocator(uint64_t seed, bool expandable) : m_rng(seed) {
    m_settings.expandable = expandable;
  }
  ReferenceAllocator(uint64_t seed, ReferenceSettings settings)
      : m_rng(seed), m_settings(settings) {}

  /// Where events go (nothing before attach: events before it are "missed").
  void attach(Sink sink) {
    std::lock_guard lock(m_mutex);
    m_sink = std::move(sink);
  }

  /// One random operation; returns the number of events emitted.
  int random_operation() {
    std::lock_guard lock(m_mutex);
    const uint64_t dice = m_rng() % 100;
    if (dice < 45 || m_live.empty()) return allocate(random_request());
    if (dice < 75) return free_one(m_live[m_rng() % m_live.size()], /*deferred=*/m_rng() % 4 == 0);
    if (dice < 88) return complete_pending();
    if (dice < 94) return empty_cache();
    if (dice < 97)
      return emit(Action::Unknown, m_rng() % 1000, 0, static_cast<uint8_t>(9 + m_rng() % 5));
    return emit(m_rng() % 2 ? Action::Snapshot : Action::Oom, m_rng() % 4096, 0,
                m_rng() % 2 ? 7 : 8);
  }

  /// torch's counters, read under the allocator's lock like getDeviceStats.
  CounterSeed stats() {
    std::lock_guard lock(m_mutex);
    return m_truth;
  }
  /// allocated/active as torch's getDeviceStats shows them right now (callable from a sink).
  AllocatorTotals totals() {
    std::lock_guard lock(m_mutex);
    return {m_truth.allocated_bytes, m_active_bytes};
  }
  /// A TotalsProbe reading `context`, a ReferenceAllocator*.
  static bool probe(void* context, AllocatorTotals* out) noexcept {
    *out = static_cast<ReferenceAllocator*>(context)->totals();
    return true;
  }
  /// Highest allocated bytes since the last call (a step's or window's truth), then restarts.
  uint64_t take_interval_peak_allocated() {
    std::lock_guard lock(m_mutex);
    const uint64_t peak = m_interval_peak_allocated;
    m_interval_peak_allocated = m_truth.allocated_bytes;
    return peak;
  }
  /// torch.cuda.reset_peak_memory_stats(): peaks become the current values.
  void reset_peaks() {
    std::lock_guard lock(m_mutex);
    m_truth.peak_allocated_bytes = m_truth.allocated_bytes;
    m_truth.peak_reserved_bytes = m_truth.reserved_bytes;
    m_truth.peak_requested_bytes = m_truth.requested_bytes;
  }
  uint64_t pending_bytes() {
    std::lock_guard lock(m_mutex);
    return m_pending_bytes;
  }
  /// Large blocks handed out whole with a remainder they did not need (the case no event shows).
  uint64_t unsplit_large_allocations() {
    std::lock_guard lock(m_mutex);
    return m_unsplit_large;
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
    return allocate(random_request());
  }
  /// An allocation of `request_bytes`; returns its address.
  uint64_t allocate_bytes(uint64_t request_bytes) {
    std::lock_guard lock(m_mutex);
    allocate(request_bytes);
    return m_live.back();
  }
  /// Frees the block at `address` (now, or deferred as after record_stream).
  void free_address(uint64_t address, bool deferred = false) {
    std::lock_guard lock(m_mutex);
    free_one(address, deferred);
  }
  /// Emits one event under the lock (for hand-written sequences).
  void emit_locked(Action action, uint64_t size_bytes) {
    std::lock_guard lock(m_mutex);
    emit(action, size_bytes, 0, static_cast<uint8_t>(action));
  }

 private:
  struct Block {
    uint64_t size = 0;
    uint64_t requested = 0;
    /// Index into m_segments.
    std::size_t segment = 0;
    bool allocated = false;
    /// Freed by the program, waiting for its streams (record_stream).
    bool pending = false;
    bool small = false;
  };
  struct Segment {
    uint64_t address = 0;
    uint64_t size = 0;
    bool small = false;
    bool released = false;
  };
  using Blocks = std::map<uint64_t, Block>;

  int emit(Action action, uint64_t size, uint64_t address, uint8_t raw) {
    if (m_sink) m_sink(action, size, address, raw);
    return 1;
  }

  uint64_t random_request() {
    switch (m_rng() % 8) {
      case 0:  // exactly at and around the pool boundary
        return kSmallSize - 1 + m_rng() % 3;
      case 1:
      case 2:
      case 3:
        return 1 + m_rng() % (kSmallSize / 4);
      default:
        return kSmallSize + 1 + m_rng() % m_settings.max_request_bytes;
    }
  }

  uint64_t round_size(uint64_t size) const {
    if (size < kMinBlock) return kMinBlock;
    const uint64_t divisions = m_settings.power2_divisions;
    if (divisions > 1 && size > kMinBlock * divisions) {
      // roundup_power2_next_division: the next of `divisions` equal steps of the power-of-two
      // interval the size falls in.
      uint64_t power2_floor = 1;
      while (power2_floor * 2 <= size) power2_floor *= 2;
      if (power2_floor == size) return size;
      const uint64_t step = std::max<uint64_t>(power2_floor / divisions, 1);
      return ((size + step - 1) / step) * step;
    }
    return kMinBlock * ((size + kMinBlock - 1) / kMinBlock);
  }

  static uint64_t allocation_size(uint64_t size) {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return kLargeBuffer;
    return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
  }

  /// Best fit like torch's BlockPool set (ordered by size, then address).
  Blocks::iterator find_free_block(uint64_t size, bool small) {
    auto best = m_blocks.end();
    for (auto it = m_blocks.begin(); it != m_blocks.end(); ++it) {
      const Block& b = it->second;
      if (b.allocated || b.pending || b.small != small || b.size < size) continue;
      if (size < m_settings.max_split_size_bytes && b.size >= m_settings.max_split_size_bytes)
        continue;
      if (size >= m_settings.max_split_size_bytes && b.size >= size + kLargeBuffer) continue;
      if (best == m_blocks.end() || b.size < best->second.size) best = it;
    }
    return best;
  }

  bool should_split(const Block& block, uint64_t size) const {
    const uint64_t remaining = block.size - size;
    if (block.small || m_settings.expandable) return remaining >= kMinBlock;
    return remaining > kSmallSize;
  }

  int allocate(uint64_t request) {
    int events = 0;
    const uint64_t size = round_size(request);
    const bool small = size <= kSmallSize;
    auto it = find_free_block(size, small);
    if (it == m_blocks.end()) {
      const uint64_t segment_size = allocation_size(size);
      const uint64_t address = m_next_address;
      // Leave a gap now and then, and sometimes none: torch never merges across segments even
      // when cudaMalloc hands out adjacent ranges.
      m_next_address += segment_size + (m_rng() % 2 ? kSmallBuffer : 0);
      m_segments.push_back({address, segment_size, small, false});
      events += emit(m_settings.expandable ? Action::SegmentMap : Action::SegmentAlloc,
                     segment_size, address, m_settings.expandable ? 5 : 3);
      add(m_truth.reserved_bytes, m_truth.peak_reserved_bytes, static_cast<int64_t>(segment_size));
      it = m_blocks
               .emplace(address, Block{segment_size, 0, m_segments.size() - 1, false, false, small})
               .first;
    }
    Block& block = it->second;
    const uint64_t address = it->first;
    if (should_split(block, size)) {
      Block remainder = block;
      remainder.size = block.size - size;
      block.size = size;
      m_blocks.emplace(address + size, remainder);
    } else if (!small && block.size > size) {
      ++m_unsplit_large;
    }
    block.allocated = true;
    block.requested = request;
    m_live.push_back(address);
    // torch traces the ALLOC first and counts the block afterwards.
    events += emit(Action::Alloc, request, address, 0);
    add(m_truth.allocated_bytes, m_truth.peak_allocated_bytes, static_cast<int64_t>(block.size));
    m_interval_peak_allocated = std::max(m_interval_peak_allocated, m_truth.allocated_bytes);
    m_active_bytes += block.size;
    add(m_truth.requested_bytes, m_truth.peak_requested_bytes, static_cast<int64_t>(request));
    return events;
  }

  int free_one(uint64_t address, bool deferred) {
    m_live.erase(std::find(m_live.begin(), m_live.end(), address));
    Block& block = m_blocks.at(address);
    block.allocated = false;
    // torch takes the block out of allocated first and traces FREE_REQUESTED afterwards.
    add(m_truth.allocated_bytes, m_truth.peak_allocated_bytes, -static_cast<int64_t>(block.size));
    int events = emit(Action::FreeRequested, block.requested, address, 1);
    m_pending_bytes += block.requested;
    if (deferred) {
      block.pending = true;
      m_pending.push_back(address);
      return events;
    }
    return events + free_block(address);
  }

  int free_block(uint64_t address) {
    auto it = m_blocks.find(address);
    Block& block = it->second;
    const int events = emit(Action::FreeCompleted, block.requested, address, 2);
    block.pending = false;
    m_pending_bytes -= block.requested;
    m_active_bytes -= block.size;
    if (tracking::requested_release_action == Action::FreeCompleted) {
      add(m_truth.requested_bytes, m_truth.peak_requested_bytes,
          -static_cast<int64_t>(block.requested));
    }
    // Merge with free neighbours of the same segment.
    auto next = std::next(it);
    if (next != m_blocks.end() && next->second.segment == block.segment &&
        !next->second.allocated && !next->second.pending) {
      block.size += next->second.size;
      m_blocks.erase(next);
    }
    if (it != m_blocks.begin()) {
      auto prev = std::prev(it);
      if (prev->second.segment == block.segment && !prev->second.allocated &&
          !prev->second.pending) {
        prev->second.size += block.size;
        m_blocks.erase(it);
      }
    }
    return events;
  }

  int complete_pending() {
    int events = 0;
    for (uint64_t address : m_pending) events += free_block(address);
    m_pending.clear();
    return events;
  }

  int empty_cache() {
    int events = 0;
    for (auto it = m_blocks.begin(); it != m_blocks.end();) {
      Segment& segment = m_segments[it->second.segment];
      const bool whole_and_free = !it->second.allocated && !it->second.pending &&
                                  it->first == segment.address && it->second.size == segment.size;
      if (!whole_and_free) {
        ++it;
        continue;
      }
      segment.released = true;
      add(m_truth.reserved_bytes, m_truth.peak_reserved_bytes, -static_cast<int64_t>(segment.size));
      events += emit(m_settings.expandable ? Action::SegmentUnmap : Action::SegmentFree,
                     segment.size, segment.address, m_settings.expandable ? 6 : 4);
      it = m_blocks.erase(it);
    }
    return events;
  }

  static void add(uint64_t& value, uint64_t& peak, int64_t delta) {
    value = static_cast<uint64_t>(static_cast<int64_t>(value) + delta);
    peak = std::max(peak, value);
  }

  std::recursive_mutex m_mutex;
  std::mt19937_64 m_rng;
  ReferenceSettings m_settings;
  Sink m_sink;
  CounterSeed m_truth;
  uint64_t m_active_bytes = 0;
  uint64_t m_interval_peak_allocated = 0;
  Blocks m_blocks;
  std::vector<Segment> m_segments;
  /// Addresses of allocated blocks, in allocation order.
  std::vector<uint64_t> m_live;
  std::vector<uint64_t> m_pending;
  uint64_t m_next_address = uint64_t{1} << 32U;
  uint64_t m_pending_bytes = 0;
  uint64_t m_unsplit_large = 0;
};

}  // namespace vramscope::tracking::testing
