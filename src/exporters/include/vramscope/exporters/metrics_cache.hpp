// src/exporters/include/vramscope/exporters/metrics_cache.hpp -- a rendered /metrics body refreshed by one background thread
//
// Scrapes never touch NVML: they copy a shared pointer to the last rendered body. However many
// Prometheus servers (or a misbehaving load balancer) scrape, the driver is sampled once per
// interval, and the cost of a scrape is bounded by sending a string.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "vramscope/exporters/prometheus.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::exporters {

/// Fills a sample. Returns false when the driver backend failed (rendered as vramscope_up 0) but
/// whatever else it filled (agents) is still exposed. Exceptions count as a failed sample.
using SampleSource = std::function<bool(SystemSample&)>;

/// The refresh thread's next deadline after `deadline`: one interval later, saturating at the
/// clock's end instead of wrapping into the past (which made an interval near 2^63 ns a busy
/// loop), and restarting from `now` when more than an interval behind (a suspended host must not
/// cause a burst of refreshes).
std::chrono::steady_clock::time_point next_refresh_deadline(
    std::chrono::steady_clock::time_point deadline, std::chrono::nanoseconds interval,
    std::chrono::steady_clock::time_point now);

/// Owns the refresh thread and the current body. Thread-safe: body() may be called from any thread.
class MetricsCache {
 public:
  MetricsCache(SampleSource source, int64_t interval_ns, PrometheusOptions options);
  ~MetricsCache();
  MetricsCache(const MetricsCache&) = delete;
  MetricsCache& operator=(const MetricsCache&) = delete;

  /// Samples once synchronously (so the first scrape already has data), then starts the thread.
  void start();
  /// Stops and joins the thread; idempotent.
  void stop();
  /// Samples and renders now, on the calling thread (start() and the thread use it).
  void refresh();
  /// The last rendered body; never null after start() or refresh().
  std::shared_ptr<const std::string> body() const;
  /// How many refreshes ran so far.
  uint64_t refresh_count() const;
  /// Message of the last failed sample ("" when the last one succeeded).
  std::string last_error() const;

 private:
  void run();

  /// Replaces `sample.steps` by the latest step with categories of each (pid, CUDA device) that
  /// still has an agent, remembered across refreshes: a sample holds only the steps completed
  /// since the previous one, but vramscope_category_bytes shows the latest step's breakdown.
  void keep_latest_steps(SystemSample& sample);

  SampleSource m_source;
  int64_t m_interval_ns;
  PrometheusOptions m_options;
  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::shared_ptr<const std::string> m_body;
  uint64_t m_refresh_count = 0;
  std::string m_last_error;
  bool m_stopping = false;
  std::thread m_thread;
  /// Guards m_latest_steps (refresh() may run on the caller's thread and on the refresh thread).
  std::mutex m_steps_mutex;
  std::map<std::pair<uint32_t, int32_t>, StepRecord> m_latest_steps;
};

}  // namespace vramscope::exporters
