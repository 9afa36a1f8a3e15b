// src/tracking/include/vramscope/tracking/device_producer.hpp -- what the tracker callback touches for one device
//
// A launch-bound step runs microseconds of interpreter and dispatcher code between two allocator
// events, which evicts the callback's state from the near caches: each pointer the callback
// follows before it reaches its data is a dependent miss, and each separate function it calls
// is an instruction line (and often a page) to fetch again. The counters, the recorder and the
// ring's producer side of a device therefore live together in one allocation, reached from a
// pointer the tracker carries in its own closure, and on_event() inlines whole into the
// tracker (agent/torchlib/torch_library.cpp): an allocation or free runs one function and makes no
// call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "vramscope/tracking/bench_gate.hpp"
#include "vramscope/tracking/device_counters.hpp"
#include "vramscope/tracking/event_recorder.hpp"
#include "vramscope/tracking/event_ring.hpp"

namespace vramscope::tracking {

/// One device's event counters, event recorder and event ring, side by side.
struct DeviceProducer {
  DeviceProducer(std::size_t ring_capacity, std::size_t recorder_capacity)
      : recorder(recorder_capacity), ring(ring_capacity) {}

  /// The tracker's entry (through TrackerTarget, below): stamps this device's attribution
  /// context -- the phase, and while a profile tracks ops the calling thread's innermost op from
  /// `current_op()` -- then does on_event()'s work. The context sits on the stamp's line, so
  /// an event reads no line outside its device's producer for it.
  template <typename CurrentOp>
  void on_tracker_event(Action action, uint64_t size_bytes, uint64_t address, uint8_t raw_action,
                        CurrentOp&& current_op) noexcept {
    const uint8_t phase_now = phase.load(std::memory_order_relaxed);
    const uint32_t op_id = op_tracking.load(std::memory_order_relaxed) ? current_op() : 0;
    on_event(action, size_bytes, address, raw_action, phase_now, op_id);
  }

  /// The callback's work: counters, the recorder, and the ring while streaming (see
  /// AgentCore::on_event). `phase_stamp` and `op_id` are the event's attribution stamp.
  void on_event(Action action, uint64_t size_bytes, uint64_t address, uint8_t raw_action,
                uint8_t phase_stamp, uint32_t op_id) noexcept {
    counters.on_event(action, size_bytes);
    // No clock read here: in a launch-bound step the vDSO clock costs ~10 of the callback's
    // ~35 ns per event (its data page is a miss). The stamp is the agent thread's last tick,
    // kept in tick_ns on this line.
    const int64_t stamp_ns = tick_ns.load(std::memory_order_relaxed);
    recorder.record(size_bytes, address, stamp_ns,
                    EventRecorder::pack(action, raw_action, phase_stamp, op_id));
    if (streaming.load(std::memory_order_relaxed)) [[unlikely]]
      push_to_ring(Event{size_bytes, address, stamp_ns, action, raw_action, phase_stamp, op_id});
  }

  // Layout. Between two events a launch-bound step evicts all of this from the near caches, so
  // each line the callback touches is a miss; the L2's adjacent-line prefetcher fetches an
  // aligned 128-byte pair as one. This first line (the stamp, the flags, the recorder's head,
  // mask and storage pointer) and the counters' first line (the current values) are such a
  // pair: a free touches that pair and the recorder's slot (whose line an earlier event
  // prefetched, see EventRecorder::record), an allocation the counters' peak marks besides
  // (tests/cpp/tracking checks the offsets).
  /// coarse_monotonic_ns() at the agent thread's last tick: the stamp of events until the next
  /// one (at most one agent interval before the event, never after it).
  alignas(128) std::atomic<int64_t> tick_ns{0};
  /// Set while a consumer (attribution) wants every event through the ring; otherwise only
  /// the counters and the recorder see them.
  std::atomic<bool> streaming{false};
  /// Is a profile() tracking ops (its RecordFunction callback enabled)? Only then is the
  /// thread's op stack read (a TLS lookup) and stamped. Set for every device at once
  /// (AgentCore::set_op_tracking).
  std::atomic<bool> op_tracking{false};
  /// The training phase (attribution::Phase) stamped on events (AgentCore::set_phase).
  std::atomic<uint8_t> phase{0};
  EventRecorder recorder;
  /// Starts on the line after the one above (DeviceCounters aligns its first line to 64).
  DeviceCounters counters;
  EventRing ring;

 private:
  /// Out of line: attribution only, and its call setup stays off the common path's lines.
  [[gnu::noinline]] void push_to_ring(Event event) noexcept { ring.push(event); }
};

/// A fixed array of DeviceProducer (each is cache-line aligned and not movable: the callback
/// holds pointers into it for the life of the process).
class DeviceProducers {
 public:
  DeviceProducers(std::size_t count, std::size_t ring_capacity, std::size_t recorder_capacity)
      : m_data(static_cast<DeviceProducer*>(::operator new[](
            count * sizeof(DeviceProducer), std::align_val_t{alignof(DeviceProducer)}))) {
    try {
      for (; m_count < count; ++m_count) {
        new (m_data + m_count) DeviceProducer(ring_capacity, recorder_capacity);
      }
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

/// What the tracker's closure holds: two words, which fit std::function's inline storage (torch
/// reads that storage anyway to make the call), so reaching the producers costs no extra line.
struct TrackerTarget {
  /// The devices' producers, indexed by torch's device index.
  DeviceProducer* producers = nullptr;
  /// How many producers `producers` holds.
  std::size_t device_count = 0;

  /// One trace entry's fields: ignored unless `device` names a producer (and, in benchmark
  /// builds, while paused: bench_gate.hpp; in every other build that test is no instruction).
  template <typename CurrentOp>
  void on_trace_entry(int64_t device, int64_t raw_action, uint64_t size_bytes, uint64_t address,
                      CurrentOp&& current_op) const noexcept {
    if (tracking_paused()) [[unlikely]]
      return;
    if (device < 0 || static_cast<std::size_t>(device) >= device_count) [[unlikely]]
      return;
    producers[device].on_tracker_event(action_from_raw(raw_action), size_bytes, address,
                                       static_cast<uint8_t>(raw_action),
                                       static_cast<CurrentOp&&>(current_op));
  }

  /// A trace entry of a private pool (torch's pool id is not (0, 0): a CUDA graph's capture, a
  /// MemPool's users), after on_trace_entry() took it as any other. Out of line: the tracker
  /// reaches it only past one branch on the entry's pool words, which torch has just written
  /// (in L1), so a default-pool event pays that branch and nothing else.
  [[gnu::noinline]] void on_private_pool_entry(int64_t device, int64_t raw_action,
                                               uint64_t size_bytes) const noexcept {
    if (tracking_paused()) return;
    if (device < 0 || static_cast<std::size_t>(device) >= device_count) return;
    producers[device].counters.on_private_pool_event(action_from_raw(raw_action), size_bytes);
  }
};

}  // namespace vramscope::tracking
