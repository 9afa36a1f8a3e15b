// src/report/include/vramscope/report/timeline.hpp -- a recording's memory over time, binned for display, every peak kept
//
// A month of 100 ms samples is 26 M samples; a chart is ~1000 pixels wide. The collector keeps
// at most 2 × target bins in one pass and in bounded memory: bins start one sampling interval
// wide and, whenever time runs past the last bin, neighbours merge pairwise (the width doubles).
// Every bin keeps the maximum of each series, never an average, so no peak is lost; the stacked
// decomposition of a process is the one of its sample with the bin's highest driver use, so the
// stack still adds up to what the driver said at that moment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vramscope/join.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::report {

/// One GPU in one time bin: the maxima over the bin's samples.
struct DeviceBin {
  /// Did any sample fall into this bin?
  bool seen = false;
  double used_bytes = 0;
  /// Sums over the agents on this GPU.
  double allocated_bytes = 0;
  double reserved_bytes = 0;
};

/// One process on one GPU in one time bin.
struct ProcessBin {
  /// Was the process in any sample of this bin?
  bool seen = false;
  /// Maxima over the bin: driver used, torch allocated and reserved.
  double used_bytes = 0;
  double allocated_bytes = 0;
  double reserved_bytes = 0;
  /// At the bin's sample with the highest driver used (reserved without one): the parts of
  /// driver used (allocated + cached free + outside PyTorch); -1 until a sample arrived.
  double peak_key_bytes = -1;
  double peak_allocated_bytes = 0;
  double peak_cached_free_bytes = 0;
  /// Driver used outside the caching allocator: for a process with an agent its
  /// JoinedProcess::non_pytorch_bytes (driver used - reserved), for one without an agent all
  /// of its driver used (nothing of it is known to be PyTorch's).
  double peak_outside_pytorch_bytes = 0;
};

/// One GPU over the recording.
struct TimelineDevice {
  uint32_t index = 0;
  std::string uuid;
  std::string name;
  uint64_t total_bytes = 0;
  std::vector<DeviceBin> bins;
};

/// Series a timeline keeps, whatever the recording holds: GPUs and processes charted on their
/// own (later ones fold into one "other processes" series per GPU; GPUs past the cap are not
/// charted), and bins over all series (past it, bins merge as when time runs on). A 5 KB file
/// may name 5,000 processes; every series costs its bins, and the page a chart per process.
inline constexpr std::size_t max_timeline_devices = 16;
inline constexpr std::size_t max_timeline_processes = 64;
inline constexpr std::size_t max_timeline_series_bins = 1U << 21U;
/// OOM marks kept (the page lists each).
inline constexpr std::size_t max_timeline_ooms = 10000;

/// One process on one GPU over the recording.
struct TimelineProcess {
  /// Does this series stand for every process of the GPU past max_timeline_processes (its pid
  /// is then 0, its bins the sums over them)?
  bool other = false;
  uint32_t pid = 0;
  std::string device_uuid;
  uint32_t device_index = 0;
  /// torch.distributed rank (-1: none or unknown) and the driver's command line.
  int32_t rank = -1;
  std::string command;
  /// Did an agent publish / the driver give a number for it at least once?
  bool any_torch = false;
  bool any_driver = false;
  std::vector<ProcessBin> bins;
};

/// An OOM an agent reported, placed on the time axis.
struct OomMark {
  /// ns since the first sample.
  int64_t offset_ns = 0;
  uint32_t device_index = 0;
  OomRecord record;
};

/// The binned recording.
struct Timeline {
  /// Width of one bin and the number of bins (the same for every series).
  uint64_t bin_ns = 0;
  std::size_t bin_count = 0;
  int64_t start_ns = 0;
  std::vector<TimelineDevice> devices;
  /// By (device index, pid).
  std::vector<TimelineProcess> processes;
  std::vector<OomMark> ooms;
  /// Were GPUs or OOMs left out, or processes folded into "other", by the caps above?
  bool omitted = false;
};

/// Folds samples (in recording order) into at most 2 × target bins.
class TimelineCollector {
 public:
  /// `first_bin_ns`: the starting bin width (the sampling interval; 1 ms when unknown).
  TimelineCollector(std::size_t target_bins, int64_t first_bin_ns);
  /// Not copied: what add() remembers points into the collector's own maps.
  TimelineCollector(const TimelineCollector&) = delete;
  TimelineCollector& operator=(const TimelineCollector&) = delete;
  TimelineCollector(TimelineCollector&&) = delete;
  TimelineCollector& operator=(TimelineCollector&&) = delete;
  ~TimelineCollector() = default;
  void add(const SystemSample& sample) { add(sample, join_processes(sample)); }
  /// The same with the sample's join already made.
  void add(const SystemSample& sample, const JoinResult& joined);
  /// Merges down to at most target_bins bins, fills bins no sample fell into with the bin
  /// before (the recorder sampled more slowly than the bin width), and returns the result.
  Timeline finish();

 private:
  /// Halves the resolution: bin i becomes bins 2i and 2i+1 merged.
  void merge_bins(std::size_t factor);
  /// Counts a new series; lowers the target so that all series' bins stay within
  /// max_timeline_series_bins.
  void add_series();
  /// Folds the summed processes past the cap on device `ds` into its "other" series.
  void add_others(const DeviceSample& ds, std::size_t index, const ProcessBin& sums);

  std::size_t m_target_bins;
  uint64_t m_bin_ns;
  /// Was a sample seen yet (m_start_ns valid)?
  bool m_started = false;
  int64_t m_start_ns = 0;
  std::size_t m_bin_count = 0;
  std::map<std::string, TimelineDevice> m_devices;
  std::map<std::pair<uint32_t, std::string>, TimelineProcess> m_processes;
  /// The key of the last lookup in m_processes (its string reused, not made per lookup).
  std::pair<uint32_t, std::string> m_key;
  /// The entry each row of add()'s walk found last, with its GPU's entry (which stands for
  /// the GPU's uuid: entries are kept by uuid). Map nodes stay where they are, and nothing
  /// is erased from m_processes, so the iterators stay valid.
  struct RowEntry {
    const TimelineDevice* device;
    std::map<std::pair<uint32_t, std::string>, TimelineProcess>::iterator process;
  };
  std::vector<RowEntry> m_rows;
  /// By device uuid: the processes past max_timeline_processes.
  std::map<std::string, TimelineProcess> m_others;
  std::vector<OomMark> m_ooms;
  std::size_t m_series = 0;
  bool m_omitted = false;
};

}  // namespace vramscope::report
