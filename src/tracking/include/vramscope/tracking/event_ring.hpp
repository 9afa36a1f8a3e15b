// src/tracking/include/vramscope/tracking/event_ring.hpp -- bounded, preallocated event queue from the callback to the agent
//
// Fed only while a consumer (attribution) wants every event: see event_recorder.hpp for why
// the callback otherwise stays off it.
//
// Single producer at a time, single consumer. The producer is whichever thread torch runs the
// trace tracker on (the allocating thread, an autograd or NCCL thread, …), but torch holds the
// device's allocator mutex around every callback, so pushes for one device never overlap and
// the mutex hands the producer role from one thread to the next with the needed ordering. The
// consumer is the agent thread (or whoever holds AgentCore's lock). push() never blocks and
// never allocates: when the ring is full the event is dropped and counted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "vramscope/tracking/events.hpp"

namespace vramscope::tracking {

/// Fixed-capacity SPSC ring of events.
class EventRing {
 public:
  /// `capacity` is rounded up to a power of two (at least 2); the storage is allocated here.
  explicit EventRing(std::size_t capacity);

  /// Appends `event`; returns false (and counts a drop) when the ring is full.
  bool push(const Event& event) noexcept;
  /// Moves up to `max_events` of the oldest events to the end of `out`; returns how many.
  std::size_t drain(std::vector<Event>& out, std::size_t max_events = SIZE_MAX);

  /// Events dropped because the ring was full.
  uint64_t dropped_count() const { return m_dropped.load(std::memory_order_relaxed); }
  std::size_t capacity() const { return m_mask + 1; }
  /// Events waiting to be drained (approximate while a producer is active).
  std::size_t size() const;

 private:
  // Producer and consumer indices on separate cache lines so the two threads do not share one.
  // The constant mask, the storage pointer and the producer's copy of the tail share the
  // producer's line: a push touches that line and the slot, and reads the consumer's line only
  // when the ring looks full from its copy -- the consumer writes that line at every drain, so
  // reading it on every push would be a coherence miss after each drain.
  alignas(64) std::atomic<uint64_t> m_head{0};
  std::atomic<uint64_t> m_dropped{0};
  /// The tail as the producer last read it (producer only; producers are serialised, see above).
  uint64_t m_tail_seen = 0;
  const std::size_t m_mask;
  const std::unique_ptr<Event[]> m_events;
  alignas(64) std::atomic<uint64_t> m_tail{0};
};

}  // namespace vramscope::tracking
