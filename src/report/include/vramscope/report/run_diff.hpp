// src/report/include/vramscope/report/run_diff.hpp -- two runs side by side: which peaks moved, by how much
//
// `vramscope diff A B` compares two recordings' summaries (the numbers `show` prints) device by
// device and process by process. Pids differ between runs, so processes are matched on what
// survives a restart: the device index and the torch.distributed rank, then an identical
// command line, then their order of appearance (pid order) among processes with and without an
// agent. What matches nothing is listed as present in one run only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vramscope/report/run_profile.hpp"

namespace vramscope::report {

/// One quantity in run A and in run B.
struct Change {
  std::optional<uint64_t> a;
  std::optional<uint64_t> b;
  /// b - a, saturating at the ends of int64_t; empty unless both are known.
  std::optional<int64_t> delta() const;
  /// 100 * (b - a) / a; empty unless both are known and a > 0.
  std::optional<double> delta_percent() const;
};

/// One GPU (matched by NVML index) in both runs.
struct DeviceDiff {
  uint32_t index = 0;
  /// Its peak in each run; empty in the run that did not see this GPU.
  std::optional<DevicePeak> a;
  std::optional<DevicePeak> b;
  Change peak_used_bytes;
};

/// One process in both runs (or in one of them).
struct ProcessDiff {
  uint32_t device_index = 0;
  /// How it was matched and what to call it: "rank 3", a command line, or "pid 1234".
  std::string label;
  /// torch.distributed rank (-1: none or unknown).
  int32_t rank = -1;
  std::optional<ProcessPeak> a;
  std::optional<ProcessPeak> b;
  Change peak_used_bytes;
  Change torch_peak_allocated_bytes;
  Change torch_peak_reserved_bytes;
  /// At each run's used peak, the agent's settled non-PyTorch bytes and their two measured
  /// parts (show's driver_parts_at_peak; empty where that peak had no pairing). Shown, never a
  /// growth check: they are values at a peak, not peaks.
  Change non_pytorch_at_peak_bytes;
  Change context_at_peak_bytes;
  Change other_at_peak_bytes;
  /// Steps seen and the distribution of allocated step peaks (max as `show` reports it).
  Change step_count;
  Change step_peak_median_bytes;
  Change step_peak_p99_bytes;
  Change step_peak_max_bytes;
  /// Requested bytes per category at each run's peak step (all empty without categories).
  std::array<Change, memory_category_count> category_bytes;
};

/// Everything `diff` prints.
struct RunDiff {
  std::vector<DeviceDiff> devices;
  /// By device index, then matched rows before rows of one run only.
  std::vector<ProcessDiff> processes;
};

/// Compares run `a` (the baseline) with run `b`.
RunDiff compare_runs(const RunProfile& a, const RunProfile& b);

/// One line per peak (device used; process used, torch allocated and reserved, step max) that
/// grew from A to B by more than `percent` percent; empty when none did. A peak that only one
/// run has is not a growth (a new GPU's or process's memory still shows in the device's peak).
std::vector<std::string> peaks_grown(const RunDiff& diff, double percent);

/// Parses "5%", "5" or "2.5%" (percent, >= 0); empty when malformed.
std::optional<double> parse_percent(const std::string& text);

/// The human comparison (MiB like `show`, deltas in binary units), '\n'-terminated lines.
/// `threshold_percent` and `grown` come from --fail-if-peak-grows (empty when not given).
std::string format_diff_text(const RunProfile& a, const RunProfile& b, const RunDiff& diff,
                             const std::optional<double>& threshold_percent,
                             const std::vector<std::string>& grown);

/// The same as one JSON document (schema_version 1, docs/json-schema.md).
std::string format_diff_json(const RunProfile& a, const RunProfile& b, const RunDiff& diff,
                             const std::optional<double>& threshold_percent,
                             const std::vector<std::string>& grown);

}  // namespace vramscope::report
