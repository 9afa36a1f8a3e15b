// src/tracking/event_recorder.cpp -- the recorder's storage and its concurrent snapshot
#include "vramscope/tracking/event_recorder.hpp"

#include <algorithm>
#include <bit>

namespace vramscope::tracking {

EventRecorder::EventRecorder(std::size_t capacity)
    : m_mask(std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity) - 1),
      m_slots(std::make_unique<Slot[]>(m_mask + 1)) {}

Event EventRecorder::unpack(const Slot& slot) {
  Event event;
  event.size_bytes = slot[0].load(std::memory_order_relaxed);
  event.address = slot[1].load(std::memory_order_relaxed);
  event.timestamp_ns = static_cast<int64_t>(slot[2].load(std::memory_order_relaxed));
  const uint64_t packed = slot[3].load(std::memory_order_relaxed);
  event.action = static_cast<Action>(packed & 0xFFU);
  event.raw_action = static_cast<uint8_t>(packed >> 8U);
  event.phase = static_cast<uint8_t>(packed >> 16U);
  event.op_id = static_cast<uint32_t>(packed >> 32U);
  return event;
}

std::vector<Event> EventRecorder::snapshot() const {
  const uint64_t capacity = m_mask + 1;
  const uint64_t end = m_head.load(std::memory_order_acquire);
  const uint64_t begin = end > capacity ? end - capacity : 0;
  std::vector<Event> out;
  out.reserve(static_cast<std::size_t>(end - begin));
  for (uint64_t i = begin; i < end; ++i) out.push_back(unpack(m_slots[i & m_mask]));
  // A slot read above may hold (part of) an event the producer wrote after `end`. The producer
  // fences after publishing head h and before writing event h, which overwrites event
  // h - capacity; so with this fence, a later head of `now` means that every event below
  // now - capacity + 1 may have been overwritten while we copied.
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t now = m_head.load(std::memory_order_relaxed);
  const uint64_t first_intact = now + 1 > capacity ? now + 1 - capacity : 0;
  if (first_intact > begin) {
    const uint64_t torn = std::min(first_intact, end) - begin;
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(torn));
  }
  return out;
}

}  // namespace vramscope::tracking
