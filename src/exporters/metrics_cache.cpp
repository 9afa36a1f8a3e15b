// src/exporters/metrics_cache.cpp -- background refresh of the rendered Prometheus body
#include "vramscope/exporters/metrics_cache.hpp"

#include <chrono>
#include <exception>
#include <iterator>
#include <set>
#include <utility>

#include "vramscope/clock.hpp"

namespace vramscope::exporters {

MetricsCache::MetricsCache(SampleSource source, int64_t interval_ns, PrometheusOptions options)
    : m_source(std::move(source)), m_interval_ns(interval_ns), m_options(options) {}

MetricsCache::~MetricsCache() { stop(); }

void MetricsCache::start() {
  refresh();
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_thread.joinable()) return;
  m_stopping = false;
  m_thread = std::thread([this] { run(); });
}

void MetricsCache::stop() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void MetricsCache::refresh() {
  SystemSample sample;
  PrometheusStatus status;
  std::string error;
  const int64_t started_ns = monotonic_ns();
  try {
    status.up = m_source(sample);
    if (!status.up) error = "driver backend failed";
  } catch (const std::exception& e) {
    status.up = false;
    error = e.what();
  }
  status.sample_duration_seconds = static_cast<double>(monotonic_ns() - started_ns) / 1e9;
  keep_latest_steps(sample);
  auto body = std::make_shared<const std::string>(render_prometheus(sample, m_options, status));
  std::lock_guard<std::mutex> lock(m_mutex);
  m_body = std::move(body);
  m_last_error = std::move(error);
  ++m_refresh_count;
}

void MetricsCache::keep_latest_steps(SystemSample& sample) {
  std::lock_guard<std::mutex> lock(m_steps_mutex);
  for (StepRecord& step : sample.steps) {
    if (!step.category_bytes) continue;
    const auto key = std::make_pair(step.pid, step.cuda_device);
    const auto found = m_latest_steps.find(key);
    if (found == m_latest_steps.end() || step.step >= found->second.step)
      m_latest_steps[key] = std::move(step);
  }
  // A process whose agent is gone takes its breakdown with it.
  std::set<std::pair<uint32_t, int32_t>> live;
  for (const AllocatorSample& allocator : sample.allocators)
    live.emplace(allocator.pid, allocator.cuda_device);
  for (auto it = m_latest_steps.begin(); it != m_latest_steps.end();) {
    it = live.count(it->first) != 0 ? std::next(it) : m_latest_steps.erase(it);
  }
  sample.steps.clear();
  for (const auto& [key, step] : m_latest_steps) sample.steps.push_back(step);
}

std::shared_ptr<const std::string> MetricsCache::body() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_body;
}

uint64_t MetricsCache::refresh_count() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_refresh_count;
}

std::string MetricsCache::last_error() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_last_error;
}

std::chrono::steady_clock::time_point next_refresh_deadline(
    std::chrono::steady_clock::time_point deadline, std::chrono::nanoseconds interval,
    std::chrono::steady_clock::time_point now) {
  using Clock = std::chrono::steady_clock;
  const auto interval_ticks = std::chrono::duration_cast<Clock::duration>(interval).count();
  Clock::rep ticks = 0;
  // Fell behind by more than an interval (suspended host): restart from now, do not burst.
  // (A difference too large for the clock's rep is surely more than an interval.)
  const bool is_far_behind = __builtin_sub_overflow(now.time_since_epoch().count(),
                                                    deadline.time_since_epoch().count(), &ticks);
  if (now > deadline && (is_far_behind || ticks > interval_ticks)) deadline = now;
  if (__builtin_add_overflow(deadline.time_since_epoch().count(), interval_ticks, &ticks)) {
    return Clock::time_point::max();
  }
  return Clock::time_point(Clock::duration(ticks));
}

void MetricsCache::run() {
  // Absolute deadlines keep the cadence from drifting by the sampling time itself.
  auto deadline = std::chrono::steady_clock::now();
  const auto interval = std::chrono::nanoseconds(m_interval_ns);
  for (;;) {
    deadline = next_refresh_deadline(deadline, interval, std::chrono::steady_clock::now());
    {
      std::unique_lock<std::mutex> lock(m_mutex);
      if (m_wake.wait_until(lock, deadline, [this] { return m_stopping; })) return;
    }
    refresh();
  }
}

}  // namespace vramscope::exporters
