// src/report/timeline.cpp -- streaming max-per-bin downsampling of device and process series
#include "vramscope/report/timeline.hpp"

#include <algorithm>
#include <tuple>

#include "vramscope/join.hpp"

namespace vramscope::report {
namespace {

/// Merges the maxima both bin kinds have; false when `from` saw nothing (then nothing moves).
template <typename Bin>
bool merge_maxima(Bin& into, const Bin& from) {
  if (!from.seen) return false;
  into.seen = true;
  into.used_bytes = std::max(into.used_bytes, from.used_bytes);
  into.allocated_bytes = std::max(into.allocated_bytes, from.allocated_bytes);
  into.reserved_bytes = std::max(into.reserved_bytes, from.reserved_bytes);
  return true;
}

void merge_into(DeviceBin& into, const DeviceBin& from) { merge_maxima(into, from); }

void merge_into(ProcessBin& into, const ProcessBin& from) {
  if (!merge_maxima(into, from)) return;
  if (from.peak_key_bytes > into.peak_key_bytes) {
    into.peak_key_bytes = from.peak_key_bytes;
    into.peak_allocated_bytes = from.peak_allocated_bytes;
    into.peak_cached_free_bytes = from.peak_cached_free_bytes;
    into.peak_outside_pytorch_bytes = from.peak_outside_pytorch_bytes;
  }
}

/// `bins` with every `factor` neighbours merged into one.
template <typename Bin>
void merge_vector(std::vector<Bin>& bins, std::size_t factor) {
  std::vector<Bin> merged((bins.size() + factor - 1) / factor);
  for (std::size_t i = 0; i < bins.size(); ++i) merge_into(merged[i / factor], bins[i]);
  bins = std::move(merged);
}

template <typename Bin>
Bin& bin_at(std::vector<Bin>& bins, std::size_t index) {
  if (bins.size() <= index) bins.resize(index + 1);
  return bins[index];
}

double bytes(uint64_t value) { return static_cast<double>(value); }

}  // namespace

TimelineCollector::TimelineCollector(std::size_t target_bins, int64_t first_bin_ns)
    : m_target_bins(std::max<std::size_t>(target_bins, 1)),
      m_bin_ns(first_bin_ns > 0 ? static_cast<uint64_t>(first_bin_ns) : 1'000'000) {}

void TimelineCollector::merge_bins(std::size_t factor) {
  for (auto& [uuid, d] : m_devices) merge_vector(d.bins, factor);
  for (auto& [key, p] : m_processes) merge_vector(p.bins, factor);
  m_bin_count = (m_bin_count + factor - 1) / factor;
  m_bin_ns *= factor;
}

void TimelineCollector::add(const SystemSample& sample, const JoinResult& joined) {
  if (!m_started) {
    m_started = true;
    m_start_ns = sample.timestamp_ns;
  }
  // Unsigned difference: exact for any two int64 timestamps; a clock step back lands in bin 0.
  const uint64_t offset_ns =
      sample.timestamp_ns > m_start_ns
          ? static_cast<uint64_t>(sample.timestamp_ns) - static_cast<uint64_t>(m_start_ns)
          : 0;
  while (offset_ns / m_bin_ns >= 2 * m_target_bins) merge_bins(2);
  const std::size_t index = static_cast<std::size_t>(offset_ns / m_bin_ns);
  m_bin_count = std::max(m_bin_count, index + 1);

  for (const JoinedDevice& jd : joined.devices) {
    const DeviceSample& ds = sample.devices[jd.device_position];
    TimelineDevice& device = m_devices[ds.uuid];
    device.index = ds.index;
    device.uuid = ds.uuid;
    if (!ds.name.empty()) device.name = ds.name;
    if (ds.total_bytes) device.total_bytes = *ds.total_bytes;
    DeviceBin& dbin = bin_at(device.bins, index);
    dbin.seen = true;
    if (ds.used_bytes) dbin.used_bytes = std::max(dbin.used_bytes, bytes(*ds.used_bytes));
    double allocated = 0;
    double reserved = 0;
    for (const JoinedProcess& row : jd.processes) {
      TimelineProcess& process = m_processes[{row.pid, ds.uuid}];
      process.pid = row.pid;
      process.device_uuid = ds.uuid;
      process.device_index = ds.index;
      ProcessBin& pbin = bin_at(process.bins, index);
      pbin.seen = true;
      double key = -1;
      if (row.driver) {
        if (row.driver->visible && !row.driver->command.empty())
          process.command = row.driver->command;
        if (row.driver->used_bytes) {
          process.any_driver = true;
          key = bytes(*row.driver->used_bytes);
          pbin.used_bytes = std::max(pbin.used_bytes, key);
        }
      }
      if (row.torch) {
        const AllocatorSample& t = *row.torch;
        process.any_torch = true;
        if (t.rank >= 0) process.rank = t.rank;
        allocated += bytes(t.allocated_bytes);
        reserved += bytes(t.reserved_bytes);
        pbin.allocated_bytes = std::max(pbin.allocated_bytes, bytes(t.allocated_bytes));
        pbin.reserved_bytes = std::max(pbin.reserved_bytes, bytes(t.reserved_bytes));
        if (key < 0) key = bytes(t.reserved_bytes);
      }
      if (key > pbin.peak_key_bytes) {
        pbin.peak_key_bytes = key;
        pbin.peak_allocated_bytes = row.torch ? bytes(row.torch->allocated_bytes) : 0;
        pbin.peak_cached_free_bytes = row.cached_free_bytes ? bytes(*row.cached_free_bytes) : 0;
        // Without an agent all of driver used is outside PyTorch.
        pbin.peak_outside_pytorch_bytes = row.non_pytorch_bytes
                                              ? bytes(*row.non_pytorch_bytes)
                                              : (row.torch ? 0 : std::max(key, 0.0));
      }
    }
    dbin.allocated_bytes = std::max(dbin.allocated_bytes, allocated);
    dbin.reserved_bytes = std::max(dbin.reserved_bytes, reserved);
  }
  for (const OomRecord& oom : sample.ooms) {
    OomMark mark;
    mark.offset_ns = static_cast<int64_t>(offset_ns);
    mark.record = oom;
    for (const DeviceSample& d : sample.devices) {
      if (d.uuid == oom.device_uuid) mark.device_index = d.index;
      for (const MigInstanceSample& mig : d.mig_instances) {
        if (mig.uuid == oom.device_uuid) mark.device_index = d.index;
      }
    }
    m_ooms.push_back(mark);
  }
}

Timeline TimelineCollector::finish() {
  if (m_bin_count > m_target_bins) merge_bins((m_bin_count + m_target_bins - 1) / m_target_bins);
  Timeline out;
  out.bin_ns = m_bin_ns;
  out.bin_count = m_bin_count;
  out.start_ns = m_start_ns;
  // A bin no sample fell into holds the bin before it (step-hold), never a dip to zero.
  std::vector<bool> any(m_bin_count, false);
  for (auto& [uuid, d] : m_devices) {
    d.bins.resize(m_bin_count);
    for (std::size_t i = 0; i < m_bin_count; ++i) any[i] = any[i] || d.bins[i].seen;
  }
  const auto hold = [&](auto& bins) {
    bins.resize(m_bin_count);
    for (std::size_t i = 1; i < m_bin_count; ++i) {
      if (!any[i]) bins[i] = bins[i - 1];
    }
  };
  for (auto& [uuid, d] : m_devices) {
    hold(d.bins);
    out.devices.push_back(std::move(d));
  }
  std::sort(out.devices.begin(), out.devices.end(),
            [](const TimelineDevice& x, const TimelineDevice& y) { return x.index < y.index; });
  for (auto& [key, p] : m_processes) {
    hold(p.bins);
    out.processes.push_back(std::move(p));
  }
  std::sort(out.processes.begin(), out.processes.end(),
            [](const TimelineProcess& x, const TimelineProcess& y) {
              return std::tie(x.device_index, x.pid) < std::tie(y.device_index, y.pid);
            });
  out.ooms = std::move(m_ooms);
  return out;
}

}  // namespace vramscope::report
