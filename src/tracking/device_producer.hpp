// src/tracking/device_producer.hpp -- what the tracker callback touches for one device
//
// A launch-bound step runs microseconds of interpreter and dispatcher code between two allocator
// events, which evicts the callback's state from the near caches: each pointer the callback
// follows before it reaches its data is a dependent miss. The counters and the ring's producer
// side of a device therefore live together in one allocation, reached from one pointer (the
// tracker's), instead of through the core, its device table and two separately allocated objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "tracking/device_counters.hpp"
#include "tracking/event_ring.hpp"

namespace vramscope::tracking {

/// One device's event counters and event ring, side by side.
struct DeviceProducer {
  explicit DeviceProducer(std::size_t ring_capacity) : ring(ring_capacity) {}

  /// The callback's work: counters plus a ring push (see AgentCore::on_event).
  void on_event(Action action, uint64_t size_bytes, uint64_t address, uint8_t raw_action,
                uint8_t phase, uint32_t op_id) noexcept {
    counters.on_event(action, size_bytes);
    // No clock read here: in a launch-bound step the vDSO clock costs ~10 of the callback's
    // ~35 ns per event (its data page is a miss); the draining thread stamps events instead.
    ring.push(Event{size_bytes, address, 0, action, raw_action, phase, op_id});
  }

  DeviceCounters counters;
  EventRing ring;
};

/// A fixed array of DeviceProducer (each is cache-line aligned and not movable: the callback
/// holds pointers into it for the life of the process).
class DeviceProducers {
 public:
  DeviceProducers(std::size_t count, std::size_t ring_capacity)
      : m_data(static_cast<DeviceProducer*>(::operator new[](
            count * sizeof(DeviceProducer), std::align_val_t{alignof(DeviceProducer)}))) {
    try {
      for (; m_count < count; ++m_count) new (m_data + m_count) DeviceProducer(ring_capacity);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~DeviceProducers() { destroy(); }
  DeviceProducers(const DeviceProducers&) = delete;
  DeviceProducers& operator=(const DeviceProducers&) = delete;

  DeviceProducer& operator[](std::size_t device) noexcept { return m_data[device]; }
  DeviceProducer* data() noexcept { return m_data; }

 private:
  void destroy() noexcept {
    while (m_count > 0) m_data[--m_count].~DeviceProducer();
    ::operator delete[](m_data, std::align_val_t{alignof(DeviceProducer)});
  }

  DeviceProducer* m_data;
  std::size_t m_count = 0;
};

}  // namespace vramscope::tracking
