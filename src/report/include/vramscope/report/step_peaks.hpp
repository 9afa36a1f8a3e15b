// src/report/include/vramscope/report/step_peaks.hpp -- every step's peak per process, for distributions and step charts
//
// RecordingSummary keeps only the largest step peak; comparing runs and drawing a step chart need
// all of them. One entry per step is small (a month of 1 s steps is ~2.6 M entries, ~100 MB
// at worst), so they are kept as they come, keyed like the summary's processes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vramscope/join.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::report {

/// One completed step of one process.
struct StepPoint {
  uint64_t step = 0;
  /// When it ended, as ns since the recording's first sample (0 when only polled).
  int64_t end_offset_ns = 0;
  uint64_t peak_allocated_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
};

/// Order statistics of a process's step peaks (nearest rank: every value is an observed one).
struct StepDistribution {
  uint64_t count = 0;
  uint64_t median_bytes = 0;
  uint64_t p99_bytes = 0;
  uint64_t max_bytes = 0;
};

/// The steps of one process on one device.
struct ProcessSteps {
  /// torch.distributed rank when an agent said so (-1: not distributed or unknown).
  int32_t rank = -1;
  /// Steps in step order. From StepRecords when the recording has any for this process (exact
  /// peaks), otherwise from the agent's polled "previous step" peaks.
  std::vector<StepPoint> steps;
};

/// Most steps kept over all processes (~100 MB; a month of 1 s steps is 2.6 M), and most
/// processes: a forged file may name new steps or pids in every sample for a few bytes each.
/// Steps and processes past them are not kept.
inline constexpr std::size_t max_step_points = 4U << 20U;
inline constexpr std::size_t max_step_processes = 16384;

/// Folds samples in (in recording order) and keeps every step, keyed by (pid, device uuid)
/// exactly as RecordingSummary::processes() is, MIG instances folded into their GPU.
class StepPeakCollector {
 public:
  /// Folds one sample in.
  void add(const SystemSample& sample) { add(sample, join_processes(sample)); }
  /// The same with the sample's join already made (the join is most of the cost per sample).
  void add(const SystemSample& sample, const JoinResult& joined);
  /// Per process, steps sorted by step number (computed on each call; call it once at the end).
  std::map<std::pair<uint32_t, std::string>, ProcessSteps> processes() const;

 private:
  /// What is known about one process while reading.
  struct Pending {
    int32_t rank = -1;
    /// By step number: from StepRecords, and from polls.
    std::map<uint64_t, StepPoint> recorded;
    std::map<uint64_t, StepPoint> polled;
  };

  /// The entry of a process, made while fewer than max_step_processes are kept (else null).
  Pending* pending(uint32_t pid, const std::string& uuid);
  /// Adds `point` to `steps`, keeping the higher peaks of a step seen twice (polls repeat until
  /// the next step ends); a new step only while fewer than max_step_points are kept.
  void merge(std::map<uint64_t, StepPoint>& steps, const StepPoint& point);

  /// Steps kept, over all processes.
  std::size_t m_points = 0;
  int64_t m_start_ns = 0;
  /// Was a sample seen yet (m_start_ns valid)?
  bool m_started = false;
  std::map<std::pair<uint32_t, std::string>, Pending> m_pending;
  /// The key of the last lookup in m_pending (its string reused, not made per lookup).
  std::pair<uint32_t, std::string> m_key;
};

/// Median, p99 and max of the allocated step peaks (empty when there are none).
std::optional<StepDistribution> allocated_distribution(const std::vector<StepPoint>& steps);

}  // namespace vramscope::report
