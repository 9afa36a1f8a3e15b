// src/view/include/vramscope/view/model.hpp -- what `vramscope top` shows, independent of how it is drawn
//
// The model joins the two views of memory for each GPU and each process: the driver's (NVML
// used bytes per process) and the allocator's (agents' allocated / reserved). It keeps a bounded
// history per GPU, and the interactive state (sort, filter, selection, help, pause, replay).
// It never reads /proc or the clock: everything comes from the SystemSamples it is given.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/join.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::view {

/// How one GPU's memory divides between owners; the parts plus free add up to total when the
/// driver's numbers are consistent.
struct MemorySplit {
  /// Driver-used bytes of processes with an agent that the caching allocator does not hold:
  /// CUDA context, NCCL and cuBLAS workspaces, other libraries.
  uint64_t non_pytorch_bytes = 0;
  /// Reserved by the caching allocator but not allocated to tensors (freed blocks it keeps).
  uint64_t cached_free_bytes = 0;
  /// Allocated to tensors, summed over the agents on this GPU.
  uint64_t allocated_bytes = 0;
  /// Used by processes without an agent, or by memory no listed process accounts for.
  uint64_t other_bytes = 0;
  /// Kept by the driver and firmware (NVML v2 only).
  uint64_t driver_reserved_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  /// Is at least one agent reporting on this GPU?
  bool has_agents = false;
};

/// One point of a GPU's history.
struct HistoryPoint {
  int64_t timestamp_ns = 0;
  /// Driver-used bytes; empty when the driver could not say.
  std::optional<uint64_t> used_bytes;
  /// Sum of the agents' allocated bytes; empty when no agent reported on this GPU.
  std::optional<uint64_t> torch_allocated_bytes;
};

/// One GPU as the view shows it.
struct GpuView {
  DeviceSample device;
  MemorySplit split;
  /// Sums over the agents on this GPU; empty when there are none.
  std::optional<uint64_t> torch_allocated_bytes;
  std::optional<uint64_t> torch_reserved_bytes;
  /// Oldest first, at most the model's history capacity.
  std::deque<HistoryPoint> history;
};

/// One row of the process table: one process on one GPU.
struct ProcessRow {
  uint32_t pid = 0;
  std::string user;
  uint32_t gpu_index = 0;
  std::string command;
  /// Driver-side bytes; empty when NVML could not say or did not list this pid (containers).
  std::optional<uint64_t> driver_used_bytes;
  /// From the process's agent; all empty when it has none.
  std::optional<uint64_t> torch_allocated_bytes;
  std::optional<uint64_t> torch_reserved_bytes;
  /// The driver's bytes part by part at the agent's last settled pairing; empty before one. The
  /// GPU's bar shows its non-PyTorch bytes, not this frame's driver - reserved, which is off
  /// while segments move (the peak frame), and the selected row's detail line names them.
  std::optional<DriverBreakdown> driver_parts;
  std::optional<uint64_t> step_peak_allocated_bytes;
  std::optional<uint64_t> step;
  std::optional<int32_t> rank;
  /// What the last finished step with a category breakdown peaked at, by MemoryCategory
  /// (requested bytes); empty until the process reports one (Monitor(model=...)).
  std::optional<CategoryBytes> step_categories;
  /// That step's number and its requested-bytes peak (the categories sum to it).
  uint64_t categories_step = 0;
  uint64_t categories_peak_bytes = 0;
  /// Are the agent's peaks sampled by polls (no allocator events: the Python fallback, a
  /// cudaMallocAsync allocator), so at most what happened? PEAK is then marked, and a line says
  /// why.
  bool peaks_sampled = false;
  /// Why the process polls, one line ending in its fix, as it published it (untrusted text);
  /// empty when it does not poll or did not say.
  std::string polling_reason;
  /// Did the driver list this pid on this GPU?
  bool in_driver_list = false;
  /// Does an agent report on this process and GPU?
  bool has_agent = false;
  /// Why the driver and agent numbers of this row do not add up (vramscope::JoinIssue bits).
  uint8_t join_issues = 0;
};

/// Column the process table is sorted by.
enum class SortKey { Memory, Pid, Allocated, Gpu, Command };

/// The name used by --sort and the footer ("memory", "pid", …).
std::string_view sort_key_name(SortKey key);
/// Parses a --sort value; empty for an unknown name.
std::optional<SortKey> parse_sort_key(std::string_view name);

/// What the header says while replaying a recording.
struct ReplayStatus {
  std::string file;
  std::string hostname;
  int64_t recorded_ns = 0;
  /// 1-based index of the sample shown and, once known, how many the file holds.
  uint64_t position = 0;
  std::optional<uint64_t> count;
  double speed = 1.0;
  /// Has playback reached the last valid sample?
  bool at_end = false;
  /// One line about a torn or corrupt tail; empty for a clean file.
  std::string tail_message;
};

/// The state of the live view.
class ViewModel {
 public:
  /// Keeps the last `history_capacity` points of each GPU.
  explicit ViewModel(std::size_t history_capacity = 1024);

  /// Replaces the current GPUs and processes with `sample` and appends to the histories.
  /// GPUs and processes absent from `sample` disappear, and so do their step breakdowns.
  void ingest(const SystemSample& sample);
  /// Keeps the category breakdowns of `steps` without changing what is shown (while paused,
  /// so that resuming shows the latest breakdown instead of one from before the pause).
  void remember_steps(const std::vector<StepRecord>& steps);
  /// Forgets every history and step breakdown (before a replay seeks).
  void clear_history();

  /// Has any sample been ingested?
  bool has_sample() const { return m_has_sample; }
  int64_t timestamp_ns() const { return m_timestamp_ns; }
  const std::string& hostname() const { return m_hostname; }
  const std::string& driver_version() const { return m_driver_version; }
  const std::vector<GpuView>& gpus() const { return m_gpus; }
  /// Rows after filtering, in sort order.
  const std::vector<ProcessRow>& rows() const { return m_rows; }
  /// Rows before filtering.
  std::size_t total_row_count() const { return m_all_rows.size(); }
  /// The most recent OOM any agent reported, if any.
  const std::optional<OomRecord>& last_oom() const { return m_last_oom; }

  SortKey sort_key() const { return m_sort_key; }
  void set_sort_key(SortKey key);
  /// Moves to the next sort key (memory → pid → allocated → gpu → command → memory).
  void cycle_sort_key();
  const std::string& filter() const { return m_filter; }
  /// Keeps rows whose command, user or pid contains `filter` (case-insensitive).
  void set_filter(std::string filter);

  /// Index into rows() of the selected row; empty when nothing is selected or it was filtered
  /// out or exited.
  std::optional<std::size_t> selected_index() const;
  /// Moves the selection by `delta` rows, clamped; selects the first row when none is selected.
  void move_selection(int delta);
  void select_first();
  void select_last();

  /// Interactive flags, kept here so that one frame is a pure function of the model.
  bool help_visible = false;
  bool paused = false;
  /// Is the user typing a filter after `/`?
  bool filter_editing = false;
  /// Draw one or two lines per GPU even when graphs would fit (`top --once`).
  bool compact_only = false;
  /// Show the key hints in the footer? Not in a frame printed as text (`top --once`, a pipe),
  /// where no key does anything.
  bool key_hints = true;
  /// Sampling interval shown in the header.
  int64_t interval_ns = 0;
  /// Present while replaying.
  std::optional<ReplayStatus> replay;
  /// One line the live source wants the user to see for a while (an agent of another vramscope
  /// version, whose memory is not shown); shown in the footer in place of the key hints.
  std::string notice;

 private:
  void rebuild_rows();
  /// Appends to m_all_rows one row per process of `joined` (the join of `sample`).
  void add_rows(const SystemSample& sample, const JoinResult& joined);

  std::size_t m_history_capacity;
  bool m_has_sample = false;
  int64_t m_timestamp_ns = 0;
  std::string m_hostname;
  std::string m_driver_version;
  std::vector<GpuView> m_gpus;
  std::vector<ProcessRow> m_all_rows;
  std::vector<ProcessRow> m_rows;
  std::optional<OomRecord> m_last_oom;
  /// The latest step with categories per (agent pid, agent device uuid); only processes whose
  /// agent the last sample listed are kept.
  std::map<std::pair<uint32_t, std::string>, StepRecord> m_category_steps;
  SortKey m_sort_key = SortKey::Memory;
  std::string m_filter;
  /// The selection follows the process (pid, GPU) across re-sorting and new samples.
  std::optional<std::pair<uint32_t, uint32_t>> m_selected;
};

}  // namespace vramscope::view
