// src/tracking/agent_core.cpp -- draining, polling, windows, steps, OOMs and publication
#include "vramscope/tracking/agent_core.hpp"

#include <algorithm>

#include "vramscope/clock.hpp"

namespace vramscope::tracking {
namespace {

CounterSeed seed_of(const TorchStats& torch) {
  return CounterSeed{torch.reserved_bytes,  torch.peak_reserved_bytes,
                     torch.requested_bytes, torch.peak_requested_bytes,
                     torch.allocated_bytes, torch.peak_allocated_bytes};
}

/// The current values that stats() and the published AllocatorSample share (`Out` is either):
/// allocated/active/inactive_split from the last poll, reserved/requested from the counters.
template <typename Device, typename Out>
void fill_current(const Device& device, uint64_t step, Out& out) {
  if (device.last_stats) {
    out.allocated_bytes = device.last_stats->allocated_bytes;
    out.active_bytes = device.last_stats->active_bytes;
    out.inactive_split_bytes = device.last_stats->inactive_split_bytes;
  }
  out.reserved_bytes = device.counters->reserved_bytes();
  out.requested_bytes = device.counters->requested_bytes();
  out.step = step;
  out.event_count = device.counters->total_event_count();
  out.dropped_event_count = device.ring->dropped_count();
  out.oom_count = device.oom_count;
  out.polling_only = device.polling_only;
}

/// A record of `device` with the fields every record of this process shares.
template <typename Record, typename Device>
Record placed_record(const AgentConfig& config, const Device& device) {
  Record record;
  record.pid = config.pid;
  record.rank = config.rank;
  record.cuda_device = static_cast<int32_t>(device.index);
  record.device_uuid = device.uuid;
  return record;
}

}  // namespace

AgentCore::AgentCore(std::vector<std::string> device_uuids, StatsProvider stats, AgentConfig config,
                     std::unique_ptr<AgentSegmentWriter> writer)
    : m_producers(device_uuids.size(), config.ring_capacity, config.history_events),
      m_stats(std::move(stats)),
      m_config(config),
      m_writer(std::move(writer)),
      m_step_started_ns(monotonic_ns()),
      m_window_started_ns(m_step_started_ns) {
  m_devices.resize(device_uuids.size());
  for (std::size_t i = 0; i < device_uuids.size(); ++i) {
    Device& device = m_devices[i];
    device.uuid = std::move(device_uuids[i]);
    device.index = i;
    device.counters = &m_producers[i].counters;
    device.ring = &m_producers[i].ring;
    m_producers[i].tick_ns.store(coarse_monotonic_ns(), std::memory_order_relaxed);
  }
  m_scratch.reserve(std::min<std::size_t>(m_config.ring_capacity, 1U << 16U));
}

void AgentCore::set_event_consumer(EventConsumer consumer) {
  std::lock_guard lock(m_mutex);
  m_consumer = std::move(consumer);
}

void AgentCore::set_streaming(bool on) {
  for (std::size_t d = 0; d < m_devices.size(); ++d) {
    m_producers[d].streaming.store(on, std::memory_order_relaxed);
  }
}

void AgentCore::set_op_tracking(bool on) {
  for (std::size_t d = 0; d < m_devices.size(); ++d) {
    m_producers[d].op_tracking.store(on, std::memory_order_relaxed);
  }
}

void AgentCore::set_phase(uint8_t phase) {
  for (std::size_t d = 0; d < m_devices.size(); ++d) {
    m_producers[d].phase.store(phase, std::memory_order_relaxed);
  }
}

void AgentCore::set_step_annotator(StepAnnotator annotator) {
  std::lock_guard lock(m_mutex);
  m_annotator = std::move(annotator);
}

void AgentCore::flush(const std::function<void()>& then) {
  std::lock_guard lock(m_mutex);
  for (Device& device : m_devices) drain(device);
  if (then) then();
}

bool AgentCore::seed(std::size_t device) {
  std::lock_guard lock(m_mutex);
  Device& d = m_devices[device];
  const bool ok = d.counters->seed([&]() -> std::optional<CounterSeed> {
    const std::optional<TorchStats> torch = m_stats(device);
    if (!torch) return std::nullopt;
    d.last_stats = torch;
    return seed_of(*torch);
  });
  return ok;
}

void AgentCore::set_polling_only(std::size_t device) {
  std::lock_guard lock(m_mutex);
  m_devices[device].polling_only = true;
  observe(m_devices[device]);
}

void AgentCore::set_polling_reason(std::string_view reason) {
  std::lock_guard lock(m_mutex);
  if (m_writer) m_writer->set_polling_reason(reason);
}

void AgentCore::drain(Device& device) {
  m_scratch.clear();
  device.ring->drain(m_scratch);
  if (m_consumer && !m_scratch.empty()) m_consumer(device.index, m_scratch);
}

void AgentCore::observe(Device& device) {
  const std::optional<TorchStats> torch = m_stats(device.index);
  if (!torch) return;
  if (device.polling_only) {
    device.counters->set_polled(seed_of(*torch));
  } else {
    // Events keep allocated exact; a value torch reports is one every open interval lived
    // through, and it covers a large allocation that no later event has settled yet.
    device.counters->observe_allocated(torch->allocated_bytes);
  }
  device.last_stats = torch;
}

void AgentCore::tick() {
  std::lock_guard lock(m_mutex);
  const int64_t coarse_now = coarse_monotonic_ns();
  for (std::size_t d = 0; d < m_devices.size(); ++d) {
    // Written only when it changed: each write costs the producer a miss on its line.
    std::atomic<int64_t>& stamp = m_producers[d].tick_ns;
    if (stamp.load(std::memory_order_relaxed) != coarse_now) {
      stamp.store(coarse_now, std::memory_order_relaxed);
    }
  }
  const int64_t now = monotonic_ns();
  const bool window_over = now - m_window_started_ns >= m_config.window_ns;
  for (Device& device : m_devices) {
    drain(device);
    observe(device);
    if (window_over) device.window_peak = device.counters->restart(PeakMark::Window);
  }
  if (window_over) m_window_started_ns = now;
  if (m_writer) {
    const int64_t wall = wall_time_ns();
    for (const Device& device : m_devices) {
      m_writer->publish(static_cast<uint32_t>(device.index), sample_of(device, wall));
    }
  }
}

std::vector<StepRecord> AgentCore::step() {
  std::lock_guard lock(m_mutex);
  const int64_t now = monotonic_ns();
  const int64_t wall = wall_time_ns();
  ++m_step;
  std::vector<StepRecord> records;
  records.reserve(m_devices.size());
  for (Device& device : m_devices) {
    observe(device);
    device.last_step_peak = device.counters->restart(PeakMark::Step);
    const uint64_t allocated = device.last_stats ? device.last_stats->allocated_bytes : 0;

    auto record = placed_record<StepRecord>(m_config, device);
    record.step = m_step;
    record.end_ns = wall;
    record.duration_ns = now - m_step_started_ns;
    record.peak_allocated_bytes = device.last_step_peak.allocated_bytes;
    record.peak_reserved_bytes = device.last_step_peak.reserved_bytes;
    record.peak_requested_bytes = device.last_step_peak.requested_bytes;
    record.allocated_bytes = allocated;
    record.reserved_bytes = device.counters->reserved_bytes();
    if (m_annotator) {
      // The annotator reads what the consumer built from events; hand it every event up to now.
      drain(device);
      record.category_bytes = m_annotator(device.index);
    }
    if (m_writer) m_writer->push_step(record);
    records.push_back(std::move(record));
  }
  m_step_started_ns = now;
  return records;
}

void AgentCore::reset_peak(std::size_t device) {
  std::lock_guard lock(m_mutex);
  Device& d = m_devices[device];
  observe(d);
  d.counters->restart(PeakMark::Global);
}

void AgentCore::restart_profile_peaks() {
  std::lock_guard lock(m_mutex);
  for (Device& device : m_devices) {
    observe(device);
    device.counters->restart(PeakMark::Profile);
  }
}

EventPeaks AgentCore::profile_peaks(std::size_t device) {
  std::lock_guard lock(m_mutex);
  Device& d = m_devices[device];
  observe(d);
  return d.counters->peaks(PeakMark::Profile);
}

DeviceStatsView AgentCore::stats(std::size_t device) {
  std::lock_guard lock(m_mutex);
  Device& d = m_devices[device];
  observe(d);
  const DeviceCounters& counters = *d.counters;
  DeviceStatsView view;
  fill_current(d, m_step, view);
  view.pending_free_bytes = counters.pending_free_bytes();
  view.peak = counters.peaks(PeakMark::Global);
  view.current_step_peak = counters.peaks(PeakMark::Step);
  view.last_step_peak = d.last_step_peak;
  view.window_peak = d.window_peak;
  view.unknown_event_count = counters.unknown_event_count();
  view.anomaly_count = counters.anomaly_count();
  view.allocated_mismatch_count = counters.allocated_mismatch_count();
  view.unsettled_count = counters.unsettled_count();
  return view;
}

OomRecord AgentCore::record_oom(std::size_t device, uint64_t requested_bytes,
                                uint64_t device_total_bytes, uint64_t device_free_bytes) {
  std::lock_guard lock(m_mutex);
  Device& d = m_devices[device];
  // Drain now so that attribution has the events that led to this OOM.
  drain(d);
  observe(d);
  ++d.oom_count;
  auto record = placed_record<OomRecord>(m_config, d);
  record.timestamp_ns = wall_time_ns();
  record.requested_bytes = requested_bytes;
  record.device_total_bytes = device_total_bytes;
  record.device_free_bytes = device_free_bytes;
  record.allocated_bytes = d.last_stats ? d.last_stats->allocated_bytes : 0;
  record.reserved_bytes = d.counters->reserved_bytes();
  m_last_oom = record;
  if (m_writer) m_writer->push_oom(record);
  return record;
}

std::optional<OomRecord> AgentCore::last_oom() const {
  std::lock_guard lock(m_mutex);
  return m_last_oom;
}

std::vector<Event> AgentCore::recent_events(std::size_t device) {
  return m_producers[device].recorder.snapshot();
}

void AgentCore::set_rank(int32_t rank, int32_t world_size) {
  std::lock_guard lock(m_mutex);
  m_config.rank = rank;
  m_config.world_size = world_size;
}

std::string AgentCore::segment_path() const {
  std::lock_guard lock(m_mutex);
  return m_writer ? m_writer->path() : std::string();
}

void AgentCore::close_segment() {
  std::lock_guard lock(m_mutex);
  m_writer.reset();
}

AllocatorSample AgentCore::sample_of(const Device& device, int64_t now_ns) const {
  const DeviceCounters& counters = *device.counters;
  auto sample = placed_record<AllocatorSample>(m_config, device);
  sample.world_size = m_config.world_size;
  fill_current(device, m_step, sample);
  const EventPeaks global = counters.peaks(PeakMark::Global);
  sample.peak_allocated_bytes = global.allocated_bytes;
  sample.peak_reserved_bytes = global.reserved_bytes;
  sample.step_peak_allocated_bytes = device.last_step_peak.allocated_bytes;
  sample.step_peak_reserved_bytes = device.last_step_peak.reserved_bytes;
  sample.updated_ns = now_ns;
  if (m_pairing != nullptr) sample.breakdown = m_pairing->breakdown(device.index);
  return sample;
}

void AgentCore::set_pairing(const DriverPairing* pairing) {
  std::lock_guard lock(m_mutex);
  m_pairing = pairing;
}

std::optional<DriverBreakdown> AgentCore::driver_breakdown(std::size_t device) const {
  const DriverPairing* pairing = nullptr;
  {
    std::lock_guard lock(m_mutex);
    pairing = m_pairing;
  }
  // The pairing guards its breakdowns itself; it is never freed once set.
  return pairing != nullptr ? pairing->breakdown(device) : std::nullopt;
}

}  // namespace vramscope::tracking
