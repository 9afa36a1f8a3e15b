// src/report/step_peaks.cpp -- collects every step's peaks and their order statistics
#include "vramscope/report/step_peaks.hpp"

#include <algorithm>

#include "vramscope/join.hpp"

namespace vramscope::report {

StepPeakCollector::Pending* StepPeakCollector::pending(uint32_t pid, const std::string& uuid) {
  // The key keeps its string's memory from one lookup to the next.
  m_key.first = pid;
  m_key.second = uuid;
  auto found = m_pending.find(m_key);
  if (found != m_pending.end()) return &found->second;
  if (m_pending.size() >= max_step_processes) return nullptr;
  return &m_pending[m_key];
}

void StepPeakCollector::merge(std::map<uint64_t, StepPoint>& steps, const StepPoint& point) {
  const auto found = steps.find(point.step);
  if (found == steps.end()) {
    if (m_points >= max_step_points) return;
    ++m_points;
    steps.emplace(point.step, point);
    return;
  }
  found->second.peak_allocated_bytes =
      std::max(found->second.peak_allocated_bytes, point.peak_allocated_bytes);
  found->second.peak_reserved_bytes =
      std::max(found->second.peak_reserved_bytes, point.peak_reserved_bytes);
}

namespace {

/// The value at nearest rank `percent` of sorted `values` (non-empty).
uint64_t nearest_rank(const std::vector<uint64_t>& values, uint64_t percent) {
  // ceil(percent/100 * n) in integers, at least 1.
  const uint64_t rank = std::max<uint64_t>(1, (percent * values.size() + 99) / 100);
  return values[std::min<uint64_t>(rank, values.size()) - 1];
}

}  // namespace

void StepPeakCollector::add(const SystemSample& sample, const JoinResult& joined) {
  if (!m_started) {
    m_start_ns = sample.timestamp_ns;
    m_started = true;
  }
  for (const JoinedDevice& jd : joined.devices) {
    const DeviceSample& d = sample.devices[jd.device_position];
    for (const JoinedProcess& row : jd.processes) {
      if (!row.torch) continue;
      Pending* const kept = pending(row.pid, d.uuid);
      if (kept == nullptr) continue;
      Pending& p = *kept;
      if (row.torch->rank >= 0) p.rank = row.torch->rank;
      // After step() n the agent publishes n and the peaks of the step that just ended, and
      // repeats them until the next step() call.
      if (row.torch->step > 0) {
        StepPoint point;
        point.step = row.torch->step;
        point.end_offset_ns = sample.timestamp_ns - m_start_ns;
        point.peak_allocated_bytes = row.torch->step_peak_allocated_bytes;
        point.peak_reserved_bytes = row.torch->step_peak_reserved_bytes;
        if (p.polled.find(point.step) == p.polled.end() && m_points < max_step_points) {
          ++m_points;
          p.polled.emplace(point.step, point);
        }
      }
    }
  }
  if (sample.steps.empty()) return;
  const DevicePositions positions(sample);
  for (const StepRecord& step : sample.steps) {
    const std::size_t found = positions.find(step.device_uuid);
    if (found == DevicePositions::none) continue;
    const std::string& uuid = sample.devices[found].uuid;
    Pending* const kept = pending(step.pid, uuid);
    if (kept == nullptr) continue;
    Pending& p = *kept;
    if (step.rank >= 0) p.rank = step.rank;
    StepPoint point;
    point.step = step.step;
    point.end_offset_ns = step.end_ns - m_start_ns;
    point.peak_allocated_bytes = step.peak_allocated_bytes;
    point.peak_reserved_bytes = step.peak_reserved_bytes;
    merge(p.recorded, point);
  }
}

std::map<std::pair<uint32_t, std::string>, ProcessSteps> StepPeakCollector::processes() const {
  std::map<std::pair<uint32_t, std::string>, ProcessSteps> out;
  for (const auto& [key, pending] : m_pending) {
    ProcessSteps& steps = out[key];
    steps.rank = pending.rank;
    const auto& source = pending.recorded.empty() ? pending.polled : pending.recorded;
    steps.steps.reserve(source.size());
    for (const auto& [number, point] : source) steps.steps.push_back(point);
  }
  return out;
}

std::optional<StepDistribution> allocated_distribution(const std::vector<StepPoint>& steps) {
  if (steps.empty()) return std::nullopt;
  std::vector<uint64_t> values;
  values.reserve(steps.size());
  for (const StepPoint& s : steps) values.push_back(s.peak_allocated_bytes);
  std::sort(values.begin(), values.end());
  StepDistribution d;
  d.count = values.size();
  d.median_bytes = nearest_rank(values, 50);
  d.p99_bytes = nearest_rank(values, 99);
  d.max_bytes = values.back();
  return d;
}

}  // namespace vramscope::report
