// src/tracking/event_ring.cpp -- the SPSC ring's index arithmetic
#include "vramscope/tracking/event_ring.hpp"

#include <bit>

namespace vramscope::tracking {

EventRing::EventRing(std::size_t capacity)
    : m_mask(std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity) - 1),
      m_events(std::make_unique<Event[]>(m_mask + 1)) {}

bool EventRing::push(const Event& event) noexcept {
  const uint64_t head = m_head.load(std::memory_order_relaxed);
  // The tail only grows, so a stale copy can only make the ring look fuller than it is: look
  // at the real one (acquire: the consumer's release means it has finished reading those
  // entries) only then.
  if (head - m_tail_seen > m_mask) {
    m_tail_seen = m_tail.load(std::memory_order_acquire);
    if (head - m_tail_seen > m_mask) {
      m_dropped.store(m_dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
  }
  m_events[head & m_mask] = event;
  m_head.store(head + 1, std::memory_order_release);
  return true;
}

std::size_t EventRing::drain(std::vector<Event>& out, std::size_t max_events) {
  const uint64_t tail = m_tail.load(std::memory_order_relaxed);
  const uint64_t head = m_head.load(std::memory_order_acquire);
  const uint64_t available = head - tail;
  const std::size_t count =
      available < max_events ? static_cast<std::size_t>(available) : max_events;
  for (std::size_t i = 0; i < count; ++i) out.push_back(m_events[(tail + i) & m_mask]);
  m_tail.store(tail + count, std::memory_order_release);
  return count;
}

std::size_t EventRing::size() const {
  const uint64_t head = m_head.load(std::memory_order_acquire);
  const uint64_t tail = m_tail.load(std::memory_order_acquire);
  return head >= tail ? static_cast<std::size_t>(head - tail) : 0;
}

}  // namespace vramscope::tracking
