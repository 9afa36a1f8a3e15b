// src/report/step_peaks.cpp -- collects every step's peaks and their order statistics
#include "vramscope/report/step_peaks.hpp"

#include <algorithm>

#include "vramscope/join.hpp"

namespace vramscope::report {
namespace {

/// The uuid of the GPU that `uuid` names or holds as a MIG instance; empty when none does.
std::string parent_uuid(const SystemSample& sample, const std::string& uuid) {
  for (const DeviceSample& d : sample.devices) {
    if (d.uuid == uuid) return d.uuid;
    for (const MigInstanceSample& mig : d.mig_instances) {
      if (mig.uuid == uuid) return d.uuid;
    }
  }
  return {};
}

/// Keeps the higher peaks when a step is seen twice (polls repeat until the next step ends).
void merge(std::map<uint64_t, StepPoint>& steps, const StepPoint& point) {
  auto [it, inserted] = steps.emplace(point.step, point);
  if (inserted) return;
  it->second.peak_allocated_bytes =
      std::max(it->second.peak_allocated_bytes, point.peak_allocated_bytes);
  it->second.peak_reserved_bytes =
      std::max(it->second.peak_reserved_bytes, point.peak_reserved_bytes);
}

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
      Pending& p = m_pending[{row.pid, d.uuid}];
      if (row.torch->rank >= 0) p.rank = row.torch->rank;
      // After step() n the agent publishes n and the peaks of the step that just ended, and
      // repeats them until the next step() call.
      if (row.torch->step > 0) {
        StepPoint point;
        point.step = row.torch->step;
        point.end_offset_ns = sample.timestamp_ns - m_start_ns;
        point.peak_allocated_bytes = row.torch->step_peak_allocated_bytes;
        point.peak_reserved_bytes = row.torch->step_peak_reserved_bytes;
        if (p.polled.find(point.step) == p.polled.end()) p.polled.emplace(point.step, point);
      }
    }
  }
  for (const StepRecord& step : sample.steps) {
    const std::string uuid = parent_uuid(sample, step.device_uuid);
    if (uuid.empty()) continue;
    Pending& p = m_pending[{step.pid, uuid}];
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
