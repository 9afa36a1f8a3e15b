// src/tracking/include/vramscope/tracking/event_recorder.hpp -- the last N allocator events of a device, kept by the producer
//
// Why not the ring: an SPSC ring's slot is written by the producer and then read by the agent
// thread on another core, so every line the producer writes again a lap later must first be
// taken back from that core (or from memory, once a lap of a 2 MiB ring has left the caches).
// torch releases its allocator mutex right after the callback, a full fence on x86, so the
// callback waits out that miss (docs/benchmarks.md: up to ~0.1 us per event measured in a
// launch-bound step on the H200 VM). The recorder instead is a small buffer (4096 events,
// 128 KiB) that only the producer writes and, as a rule, only the producer touches: it stays in
// the producer's own cache. It overwrites the oldest event and never drops one. Readers (the OOM
// post-mortem) copy it while the producer may still write, and keep only the events the
// producer cannot have overwritten during the copy.
//
// Its own cache, but not its near caches: a slot's line was last written one lap (4096 events)
// earlier, so every other event (two 32-byte slots per line) used to write a line that had left
// the near caches, and torch's unlock waited for it. Each event therefore prefetches the next
// line, whose miss then overlaps the program's own work before the event that writes it. On
// the launch-bound small-ops step that took vramscope's share of the callback from +0.82 % to
// +0.32 % of the step, and from +0.55 % to +0.36 % in a second run (H200, docs/benchmarks.md).
//
// Producers are serialised by torch's allocator mutex (see event_ring.hpp), so there is one
// producer at a time; any number of readers may snapshot concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "vramscope/tracking/events.hpp"

namespace vramscope::tracking {

/// Fixed-capacity, overwriting record of the most recent events.
class EventRecorder {
 public:
  /// `capacity` is rounded up to a power of two (at least 2); the storage is allocated here.
  explicit EventRecorder(std::size_t capacity);

  /// Appends `event`, overwriting the oldest one when full. Producer only; never blocks.
  void record(const Event& event) noexcept {
    record(event.size_bytes, event.address, event.timestamp_ns,
           pack(event.action, event.raw_action, event.phase, event.op_id));
  }
  /// The same from an event's words (`packed` from pack()): the tracker's form, which keeps the
  /// event in registers instead of building it on the stack first.
  void record(uint64_t size_bytes, uint64_t address, int64_t timestamp_ns,
              uint64_t packed) noexcept {
    const uint64_t head = m_head.load(std::memory_order_relaxed);
    // Orders the previous head store before this slot's writes: a reader that sees any word
    // of this event then sees a head of at least `head` and discards the slot (see snapshot).
    std::atomic_thread_fence(std::memory_order_release);
    Slot& slot = m_slots[head & m_mask];
    slot[0].store(size_bytes, std::memory_order_relaxed);
    slot[1].store(address, std::memory_order_relaxed);
    slot[2].store(static_cast<uint64_t>(timestamp_ns), std::memory_order_relaxed);
    slot[3].store(packed, std::memory_order_relaxed);
    m_head.store(head + 1, std::memory_order_release);
    // Slot head + 2 starts 64 bytes after slot head, on the next line (slots never span two
    // lines): asked for now, its miss overlaps the program's work before the event that writes it
    // instead of delaying torch's unlock after that event (a locked instruction waits for the
    // store buffer to drain). A hint: it cannot fault and orders nothing.
    __builtin_prefetch(&m_slots[(head + 2) & m_mask], 1, 3);
  }
  /// Word 3 of a slot: action, raw action, phase and op id.
  static uint64_t pack(Action action, uint8_t raw_action, uint8_t phase, uint32_t op_id) {
    return static_cast<uint64_t>(action) | (uint64_t{raw_action} << 8U) | (uint64_t{phase} << 16U) |
           (uint64_t{op_id} << 32U);
  }

  /// The kept events, oldest first: at most capacity() - 1 of them (the oldest slot may be the
  /// one a producer is overwriting). Safe while a producer writes: events it overwrote during
  /// the copy are left out, so the result may be shorter.
  std::vector<Event> snapshot() const;

  /// Events recorded since construction.
  uint64_t recorded_count() const { return m_head.load(std::memory_order_acquire); }
  std::size_t capacity() const { return m_mask + 1; }

 private:
  // Four words per event, each an atomic so that a concurrent copy is well defined (relaxed
  // atomics compile to plain moves). Word 3 is pack()'s.
  // Aligned to its size, so that no slot spans two lines and each line holds two slots.
  struct alignas(32) Slot : std::array<std::atomic<uint64_t>, 4> {};
  static_assert(sizeof(Slot) == 32);
  static Event unpack(const Slot& slot);

  std::atomic<uint64_t> m_head{0};
  const std::size_t m_mask;
  const std::unique_ptr<Slot[]> m_slots;
};

}  // namespace vramscope::tracking
