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
  for (auto& [uuid, p] : m_others) merge_vector(p.bins, factor);
  m_bin_count = (m_bin_count + factor - 1) / factor;
  m_bin_ns *= factor;
}

void TimelineCollector::add_series() {
  ++m_series;
  // Up to 2 × target bins live per series while collecting.
  const std::size_t most = std::max<std::size_t>(max_timeline_series_bins / (2 * m_series), 1);
  m_target_bins = std::min(m_target_bins, most);
  while (m_bin_count >= 2 * m_target_bins) merge_bins(2);
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

  std::size_t rows = 0;
  for (const JoinedDevice& jd : joined.devices) {
    const DeviceSample& ds = sample.devices[jd.device_position];
    auto found = m_devices.find(ds.uuid);
    if (found == m_devices.end()) {
      if (m_devices.size() >= max_timeline_devices) {
        m_omitted = true;
        continue;
      }
      found = m_devices.emplace(ds.uuid, TimelineDevice{}).first;
      add_series();
    }
    TimelineDevice& device = found->second;
    device.index = ds.index;
    device.uuid = ds.uuid;
    if (!ds.name.empty()) device.name = ds.name;
    if (ds.total_bytes) device.total_bytes = *ds.total_bytes;
    DeviceBin& dbin = bin_at(device.bins, index);
    dbin.seen = true;
    if (ds.used_bytes) dbin.used_bytes = std::max(dbin.used_bytes, bytes(*ds.used_bytes));
    double allocated = 0;
    double reserved = 0;
    /// The processes past the cap, summed: their share of the stack at this sample.
    ProcessBin others;
    for (const JoinedProcess& row : jd.processes) {
      // The samples of a recording mostly list the same processes in the same order: the entry
      // this row found in the previous sample is taken when its pid and GPU are the row's.
      const std::size_t at = rows++;
      auto kept = m_processes.end();
      if (at < m_rows.size() && m_rows[at].device == &device &&
          m_rows[at].process->first.first == row.pid) {
        kept = m_rows[at].process;
      } else {
        // The key keeps its string's memory from one lookup to the next.
        m_key.first = row.pid;
        m_key.second = ds.uuid;
        kept = m_processes.find(m_key);
        if (kept == m_processes.end() && m_processes.size() < max_timeline_processes) {
          kept = m_processes.emplace(std::make_pair(row.pid, ds.uuid), TimelineProcess{}).first;
          add_series();
        }
        if (kept != m_processes.end() && at < max_timeline_processes) {
          if (m_rows.size() <= at) m_rows.resize(at + 1, RowEntry{nullptr, m_processes.end()});
          m_rows[at] = RowEntry{&device, kept};
        }
      }
      if (kept == m_processes.end()) {
        m_omitted = true;
        others.seen = true;
        if (row.driver && row.driver->used_bytes)
          others.used_bytes += bytes(*row.driver->used_bytes);
        if (row.torch) {
          others.allocated_bytes += bytes(row.torch->allocated_bytes);
          others.reserved_bytes += bytes(row.torch->reserved_bytes);
          allocated += bytes(row.torch->allocated_bytes);
          reserved += bytes(row.torch->reserved_bytes);
        }
        continue;
      }
      TimelineProcess& process = kept->second;
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
    if (others.seen) add_others(ds, index, others);
  }
  if (sample.ooms.empty()) return;
  const std::unordered_map<std::string_view, std::size_t> positions = device_positions(sample);
  for (const OomRecord& oom : sample.ooms) {
    if (m_ooms.size() >= max_timeline_ooms) {
      m_omitted = true;
      break;
    }
    OomMark mark;
    mark.offset_ns = static_cast<int64_t>(offset_ns);
    mark.record = oom;
    const auto found = positions.find(oom.device_uuid);
    if (found != positions.end()) mark.device_index = sample.devices[found->second].index;
    m_ooms.push_back(mark);
  }
}

void TimelineCollector::add_others(const DeviceSample& ds, std::size_t index,
                                   const ProcessBin& sums) {
  auto found = m_others.find(ds.uuid);
  if (found == m_others.end()) {
    found = m_others.emplace(ds.uuid, TimelineProcess{}).first;
    found->second.other = true;
    found->second.device_uuid = ds.uuid;
    found->second.command = "processes past the first " + std::to_string(max_timeline_processes);
    add_series();
  }
  TimelineProcess& other = found->second;
  other.device_index = ds.index;
  other.any_driver = other.any_driver || sums.used_bytes > 0;
  other.any_torch = other.any_torch || sums.reserved_bytes > 0;
  ProcessBin& bin = bin_at(other.bins, index);
  merge_maxima(bin, sums);
  const double key = other.any_driver ? sums.used_bytes : sums.reserved_bytes;
  if (key > bin.peak_key_bytes) {
    bin.peak_key_bytes = key;
    bin.peak_allocated_bytes = sums.allocated_bytes;
    bin.peak_cached_free_bytes = std::max(sums.reserved_bytes - sums.allocated_bytes, 0.0);
    bin.peak_outside_pytorch_bytes = std::max(key - sums.reserved_bytes, 0.0);
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
  for (auto& [uuid, p] : m_others) {
    hold(p.bins);
    out.processes.push_back(std::move(p));
  }
  // Each GPU's "other processes" last.
  std::sort(out.processes.begin(), out.processes.end(),
            [](const TimelineProcess& x, const TimelineProcess& y) {
              return std::tie(x.device_index, x.other, x.pid) <
                     std::tie(y.device_index, y.other, y.pid);
            });
  out.ooms = std::move(m_ooms);
  out.omitted = m_omitted;
  return out;
}

}  // namespace vramscope::report
