// src/exporters/include/vramscope/exporters/tensorboard.hpp -- native TensorBoard event-file writer (no TensorFlow, no protobuf)
//
// An event file is a sequence of TFRecords (notes §9), each one serialized `Event` message:
//
//   ┌────────────────┬──────────────────────┬─────────────────┬──────────────────────┐
//   │ length  u64 LE │ masked crc32c(length)│ payload (Event) │ masked crc32c(payload)│
//   │ 8 bytes        │ u32 LE               │ length bytes    │ u32 LE               │
//   └────────────────┴──────────────────────┴─────────────────┴──────────────────────┘
//
//   Event   { 1: wall_time double (0x09) | 2: step int64 (0x10) | 3: file_version string (0x1A)
//             | 5: summary Summary (0x2A) }
//   Summary { 1: repeated Value (0x0A) }
//   Value   { 1: tag string (0x0A) | 2: simple_value float32 (0x15) }
//
// simple_value is the one scalar form every reader accepts; it is float32, so byte counts above
// 16 MiB are charted with ~7 significant digits. Tag scheme: docs/tensorboard.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/exporters/sink.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::exporters {

/// One scalar of an event: a tag and its value.
struct TensorBoardScalar {
  std::string tag;
  double value = 0;
};

/// Serializes Event{wall_time, file_version="brain.Event:2"} (the first event of every file).
std::string encode_file_version_event(double wall_time_s);
/// Serializes Event{wall_time, step, summary{value...}} with simple_value scalars.
std::string encode_scalars_event(const std::vector<TensorBoardScalar>& scalars, int64_t step,
                                 double wall_time_s);
/// Wraps a payload in TFRecord framing with masked CRC-32C.
std::string frame_tfrecord(std::string_view payload);
/// `events.out.tfevents.<10-digit seconds>.<hostname>.<pid>.<counter>` (the Python writers' form).
std::string tensorboard_file_name(int64_t unix_seconds, std::string_view hostname, uint32_t pid,
                                  uint32_t counter);

/// A tag suffix and the sample field it carries (a member pointer into `Record`).
template <typename Record, typename Value>
struct TensorBoardTag {
  std::string_view tag;
  Value Record::*member;
};

// Every tag the writer produces, in the order it writes them. Torch tags follow the process
// prefix `memory/[rank<R>/|pid<P>/]cuda<D>/` (tensorboard_torch_prefix), driver tags
// `driver/gpu<N>/`. The in-process Monitor (python/vramscope/steps/tensorboard.py) takes its
// step tags from tensorboard_step_scalars through the agent, so the scheme exists only here.

/// Per sample, with the allocator's current step as the TensorBoard step.
inline constexpr std::array<TensorBoardTag<AllocatorSample, uint64_t>, 4>
    tensorboard_allocator_tags = {{
        {"allocated_bytes", &AllocatorSample::allocated_bytes},
        {"reserved_bytes", &AllocatorSample::reserved_bytes},
        {"requested_bytes", &AllocatorSample::requested_bytes},
        {"active_bytes", &AllocatorSample::active_bytes},
    }};
/// Per completed step (then `category/<name>_bytes` per MemoryCategory, when tracked).
inline constexpr std::array<TensorBoardTag<StepRecord, uint64_t>, 3> tensorboard_step_tags = {{
    {"step_peak_allocated_bytes", &StepRecord::peak_allocated_bytes},
    {"step_peak_reserved_bytes", &StepRecord::peak_reserved_bytes},
    {"step_peak_requested_bytes", &StepRecord::peak_requested_bytes},
}};
/// Written as 1 beside a step's peaks when its agent polls (cudaMallocAsync, a pluggable
/// allocator, the Python fallback): the chart's peaks are then at least the values shown. Never
/// written for exact peaks, so a run of an agent that polls is the one with this chart.
inline constexpr std::string_view tensorboard_sampled_tag = "step_peaks_sampled";
/// Per completed step of the in-process Monitor, before the peaks: its run has no per-sample
/// allocator tags, so the values at the step's end come with the step.
inline constexpr std::array<TensorBoardTag<StepRecord, uint64_t>, 2> tensorboard_step_end_tags = {{
    {"allocated_bytes", &StepRecord::allocated_bytes},
    {"reserved_bytes", &StepRecord::reserved_bytes},
}};
/// Per completed step of the in-process Monitor, after the peaks, when NVML can tell: what the
/// driver charges the process beyond the allocator's reserved bytes.
inline constexpr std::string_view tensorboard_non_pytorch_tag = "non_pytorch_bytes";
/// After non_pytorch_bytes, its parts from the agent's last settled pairing, each when measured
/// (docs/agent-api.md): per completed step of the in-process Monitor, and per sample in exports
/// of recordings whose agents paired (format 4).
struct DriverPartValues {
  std::optional<uint64_t> context_bytes;
  std::optional<uint64_t> other_bytes;
  std::optional<uint64_t> nccl_bytes;
  std::optional<uint64_t> private_pool_bytes;
};
inline constexpr std::array<TensorBoardTag<DriverPartValues, std::optional<uint64_t>>, 4>
    tensorboard_driver_part_tags = {{
        {"non_pytorch/context_bytes", &DriverPartValues::context_bytes},
        {"non_pytorch/other_bytes", &DriverPartValues::other_bytes},
        {"non_pytorch/nccl_bytes", &DriverPartValues::nccl_bytes},
        {"private_pool_bytes", &DriverPartValues::private_pool_bytes},
    }};
/// The values of tensorboard_driver_part_tags in a settled breakdown.
DriverPartValues driver_part_values(const DriverBreakdown& b);
/// Per OOM, at the OOM's time.
inline constexpr TensorBoardTag<OomRecord, uint64_t> tensorboard_oom_tag = {
    "oom_requested_bytes", &OomRecord::requested_bytes};
/// Per sample and GPU, when the driver reported the value (TensorBoardOptions::driver_tags).
inline constexpr std::array<TensorBoardTag<DeviceSample, std::optional<uint64_t>>, 4>
    tensorboard_driver_tags = {{
        {"used_bytes", &DeviceSample::used_bytes},
        {"free_bytes", &DeviceSample::free_bytes},
        {"reserved_bytes", &DeviceSample::reserved_bytes},
        {"total_bytes", &DeviceSample::total_bytes},
    }};

/// `memory/[rank<R>/|pid<P>/]cuda<D>/`: with `qualify_process` the rank, or the pid when the
/// process has no rank (rank < 0).
std::string tensorboard_torch_prefix(bool qualify_process, uint32_t pid, int32_t rank,
                                     int32_t cuda_device);

/// The scalars of one completed step under `prefix`, in the order they are written: with
/// `end_values` (the in-process Monitor) the tensorboard_step_end_tags first, then the peaks
/// (tensorboard_step_tags), with `peaks_sampled` tensorboard_sampled_tag (1: the peaks are the
/// highest a polling agent saw, not exact; absent when they are exact), with `end_values` the
/// non-PyTorch bytes and its measured parts (tensorboard_driver_part_tags) when known, and
/// `category/<name>_bytes` per MemoryCategory when the step has categories.
std::vector<TensorBoardScalar> tensorboard_step_scalars(
    const StepRecord& step, std::string_view prefix, bool end_values = false,
    std::optional<uint64_t> non_pytorch_bytes = std::nullopt, const DriverPartValues& parts = {},
    bool peaks_sampled = false);

/// How sample values become tags.
struct TensorBoardOptions {
  /// Put the process in torch tags (`memory/rank0/cuda0/...`, or `memory/pid123/cuda0/...` without
  /// a rank)? Needed when one run holds several processes (export of a recording); the in-process
  /// Monitor writes one run directory per rank instead and leaves it off, so ranks overlay.
  bool qualify_process = true;
  /// Write driver-view tags (`driver/gpuN/used_bytes`...)?
  bool driver_tags = true;
  /// Automatic flush when this long passed since the last one (checked on each write; 0 = only
  /// explicit flush() and close()). Whole records are flushed either way.
  int64_t flush_interval_ns = 2000000000;
};

/// Writes one event file into a run directory. Not thread-safe.
class TensorBoardWriter : public Sink {
 public:
  /// Creates `log_dir` (0700, parents too) if missing and a new event file in it (0600) whose first
  /// record is the file_version event. Throws vramscope::Error on failure.
  TensorBoardWriter(const std::string& log_dir, const TensorBoardOptions& options = {});
  ~TensorBoardWriter() override;

  /// Writes one scalar event (like SummaryWriter.add_scalar).
  void add_scalar(std::string_view tag, double value, int64_t step, double wall_time_s);
  /// Writes several scalars sharing one step and time as one event.
  void add_scalars(const std::vector<TensorBoardScalar>& scalars, int64_t step, double wall_time_s);
  /// Writes a sample's driver values (step = samples written so far) and each agent's allocator
  /// values (step = its training step), then its completed steps and OOMs.
  void write(const SystemSample& sample) override;
  /// Writes the peaks of one completed step at that step number (`peaks_sampled`: its agent
  /// polls, PolledSteps).
  void write_step(const StepRecord& step, bool peaks_sampled = false);
  void flush() override;
  /// Flushes and closes; later writes throw.
  void close();
  /// Path of the event file.
  const std::string& path() const;

 private:
  void append_event(const std::string& payload);

  TensorBoardOptions m_options;
  std::unique_ptr<BufferedFile> m_file;
  std::string m_path;
  int64_t m_sample_index = 0;
  int64_t m_last_flush_ns = 0;
};

}  // namespace vramscope::exporters
