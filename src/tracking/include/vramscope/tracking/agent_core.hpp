// src/tracking/include/vramscope/tracking/agent_core.hpp -- everything the in-process agent does, without torch
//
// The torch layer (agent/) feeds events into on_event() from the trace tracker, supplies a
// StatsProvider built on getDeviceStats, and runs tick() on its own thread. Tests drive the
// same class with synthetic events and a synthetic provider.
//
// Exactness: reserved, requested and allocated bytes and their peaks follow every event
// (DeviceCounters; allocated reads torch's totals from inside the callback for large blocks),
// so every peak -- global, per step, per window -- is torch's own value over the same interval,
// whatever the program does with torch's peaks. Polling-only devices (no tracker) see torch's
// values at polls: their peaks are sampled.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/agent_segment.hpp"
#include "vramscope/sample.hpp"
#include "vramscope/tracking/device_counters.hpp"
#include "vramscope/tracking/device_producer.hpp"
#include "vramscope/tracking/device_stats.hpp"
#include "vramscope/tracking/driver_pairing.hpp"
#include "vramscope/tracking/event_ring.hpp"
#include "vramscope/tracking/events.hpp"

namespace vramscope::tracking {

/// torch's counters for one device (getDeviceStats, aggregate pool).
struct TorchStats {
  uint64_t allocated_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  uint64_t requested_bytes = 0;
  uint64_t peak_requested_bytes = 0;
  uint64_t active_bytes = 0;
  uint64_t inactive_split_bytes = 0;
};

/// Reads torch's counters of a device; empty when they cannot be read (pluggable allocator).
/// Must be safe to call from any thread that does not hold that device's allocator lock.
using StatsProvider = std::function<std::optional<TorchStats>(std::size_t device)>;

/// Tunables of an AgentCore.
struct AgentConfig {
  /// Pid published in records (the process's own pid).
  uint32_t pid = 0;
  /// torch.distributed rank and world size; -1 when not distributed.
  int32_t rank = -1;
  int32_t world_size = -1;
  /// Length of the rolling window whose peaks stats() reports.
  int64_t window_ns = 1'000'000'000;
  /// Events buffered per device between ticks while streaming (rounded up to a power of two).
  std::size_t ring_capacity = 1U << 16U;
  /// Recent events kept per device for the OOM post-mortem (the recorder's capacity, rounded
  /// up to a power of two; recent_events() returns up to one less).
  std::size_t history_events = 4096;
};

/// The agent's per-process state: counters, rings, peaks, steps, OOMs, publication.
class AgentCore {
 public:
  /// One tracked device per entry of `device_uuids` (CUDA ordinal = index). `writer` may be
  /// null (publish=False). Threads: on_event() from trackers; everything else may be called
  /// from any thread and serialises on an internal mutex that on_event() never takes.
  AgentCore(std::vector<std::string> device_uuids, StatsProvider stats, AgentConfig config,
            std::unique_ptr<AgentSegmentWriter> writer);
  AgentCore(const AgentCore&) = delete;
  AgentCore& operator=(const AgentCore&) = delete;

  std::size_t device_count() const { return m_devices.size(); }

  /// The callback's work: counters, the recorder, and a ring push while streaming. Never
  /// blocks, allocates or throws.
  /// `device` must be < device_count(). `phase` and `op_id` are the attribution context of the
  /// calling thread (0 when not attributing).
  void on_event(std::size_t device, Action action, uint64_t size_bytes, uint64_t address,
                uint8_t raw_action, uint8_t phase = 0, uint32_t op_id = 0) noexcept {
    m_producers[device].on_event(action, size_bytes, address, raw_action, phase, op_id);
  }
  /// The devices' producers (device_count() of them, never moved): a tracker may keep this
  /// pointer and call DeviceProducer::on_event() itself, one pointer away from its data.
  DeviceProducer* producers() noexcept { return m_producers.data(); }
  /// What a tracker's closure holds to reach this core's producers (valid for the core's life).
  TrackerTarget tracker_target() noexcept {
    return TrackerTarget{m_producers.data(), device_count()};
  }

  /// Receives every drained batch of a device, on the draining thread with the core's lock held
  /// (attribution). Set it before events flow; it must not call back into the core. Events reach
  /// the ring, and so the consumer, only while streaming.
  using EventConsumer = std::function<void(std::size_t device, const std::vector<Event>& events)>;
  void set_event_consumer(EventConsumer consumer);
  /// Sends every later event of every device through the ring to the consumer (true), or only
  /// to the counters and the recorder (false, the default: no cross-core traffic per event).
  void set_streaming(bool on);
  /// Stamps every later event with its thread's innermost op (true: a profile tracks ops), or
  /// with no op (false, the default). Every device at once.
  void set_op_tracking(bool on);
  /// Stamps every later event of every device with `phase` (an attribution::Phase value).
  void set_phase(uint8_t phase);
  /// Drains every ring now, then runs `then` (may be empty) under the same lock, so that it sees
  /// a consumer that is up to date.
  void flush(const std::function<void()>& then = {});

  /// Supplies the category breakdown of the step that step() closes on a device (attribution),
  /// or nothing. Called by step() with the core's lock held, after that device's ring has been
  /// drained into the consumer; it must not call back into the core.
  using StepAnnotator = std::function<std::optional<CategoryBytes>(std::size_t device)>;
  void set_step_annotator(StepAnnotator annotator);

  /// Lets `device`'s large allocations and frees read torch's totals from inside the tracker
  /// callback (DeviceCounters::set_totals_probe). Call before the tracker is attached.
  void set_totals_probe(std::size_t device, TotalsProbe probe, void* context) noexcept {
    m_producers[device].counters.set_totals_probe(probe, context);
  }

  /// Publishes `pairing`'s settled breakdowns with every later sample (it must outlive the
  /// core; the agent's pairing is never freed). Call before the agent thread starts.
  void set_pairing(const DriverPairing* pairing);
  /// The last settled breakdown of `device` by the pairing of set_pairing() (what every
  /// sample publishes, the OOM snapshot carries and Python's driver_breakdown() returns);
  /// empty without a pairing, before its first settled one, or for a device it does not pair.
  std::optional<DriverBreakdown> driver_breakdown(std::size_t device) const;

  /// Seeds the event counters of `device` from the provider (call after the tracker is
  /// attached). Returns false when the provider fails or events never paused.
  bool seed(std::size_t device);
  /// Marks `device` as tracked by polling only (no tracker could be attached).
  void set_polling_only(std::size_t device);
  /// Says in the segment why the devices are polled, one line ending in its fix (published
  /// once, beside the polled slots: AgentSegmentWriter::set_polling_reason); nothing without a
  /// writer.
  void set_polling_reason(std::string_view reason);

  /// One agent-thread iteration: stamp the clock events carry, drain rings into the consumer,
  /// poll the provider, roll the window, publish every device to the segment.
  void tick();
  /// Closes the current step on every device; publishes and returns one record per device.
  std::vector<StepRecord> step();
  /// Restarts vramscope's global peaks of `device` at the current values (torch's untouched).
  void reset_peak(std::size_t device);
  /// Restarts every device's profile peaks (vramscope.profile() starts), and reads them.
  void restart_profile_peaks();
  EventPeaks profile_peaks(std::size_t device);
  /// Current view of one device (polls the provider first, so allocated is fresh).
  DeviceStatsView stats(std::size_t device);
  /// Records an OOM seen by torch's observer on `device`; publishes it and returns it.
  OomRecord record_oom(std::size_t device, uint64_t requested_bytes, uint64_t device_total_bytes,
                       uint64_t device_free_bytes);
  /// The most recent OOM, if any.
  std::optional<OomRecord> last_oom() const;
  /// The last events of `device` (up to AgentConfig::history_events - 1), oldest first. Safe
  /// while events arrive.
  std::vector<Event> recent_events(std::size_t device);
  /// Changes the rank and world size put in later records.
  void set_rank(int32_t rank, int32_t world_size);
  /// Event counters of `device` (read-only use by the torch layer's fast paths).
  const DeviceCounters& counters(std::size_t device) const { return *m_devices[device].counters; }
  /// Path of the segment file, or "" without a writer.
  std::string segment_path() const;
  /// Removes the segment file and stops publishing (at interpreter exit).
  void close_segment();
  /// NVML's name of `device` (as given at construction; "" when unknown).
  const std::string& device_uuid(std::size_t device) const { return m_devices[device].uuid; }
  /// Is `device` tracked by polling only? Fixed once attach has finished.
  bool polling_only(std::size_t device) const { return m_devices[device].polling_only; }

 private:
  struct Device;
  /// Drains `device`'s ring into the consumer (caller holds m_mutex).
  void drain(Device& device);
  /// Polls the provider and folds allocated (and, when polling, everything) into the marks.
  void observe(Device& device);
  AllocatorSample sample_of(const Device& device, int64_t now_ns) const;

  struct Device {
    std::string uuid;
    std::size_t index = 0;
    /// This device's entries of m_producers.
    DeviceCounters* counters = nullptr;
    EventRing* ring = nullptr;
    bool polling_only = false;
    std::optional<TorchStats> last_stats;
    EventPeaks last_step_peak;
    EventPeaks window_peak;
    uint64_t oom_count = 0;
  };

  mutable std::mutex m_mutex;
  DeviceProducers m_producers;
  std::vector<Device> m_devices;
  StatsProvider m_stats;
  AgentConfig m_config;
  std::unique_ptr<AgentSegmentWriter> m_writer;
  uint64_t m_step = 0;
  int64_t m_step_started_ns;
  int64_t m_window_started_ns;
  std::optional<OomRecord> m_last_oom;
  std::vector<Event> m_scratch;
  EventConsumer m_consumer;
  StepAnnotator m_annotator;
  const DriverPairing* m_pairing = nullptr;
};

}  // namespace vramscope::tracking
