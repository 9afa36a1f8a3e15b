// src/report/include/vramscope/report/recording_summary.hpp -- what `vramscope show` says about a recording
//
// A RecordingSummary is fed every sample of a recording in order and keeps only peaks and
// counts, so a recording of any length is summarised in constant memory per device and process.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vramscope/format/recording.hpp"
#include "vramscope/join.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::report {

/// Peak of one GPU over the recording.
struct DevicePeak {
  uint32_t index = 0;
  std::string name;
  std::string uuid;
  std::optional<uint64_t> total_bytes;
  std::optional<uint64_t> peak_used_bytes;
  /// When the peak was seen, as ns since the first sample.
  int64_t peak_offset_ns = 0;
};

/// Peaks of one process on one GPU over the recording.
struct ProcessPeak {
  uint32_t pid = 0;
  std::string device_uuid;
  uint32_t device_index = 0;
  std::string command;
  /// Driver-side peak and its time (empty when the driver never gave a number).
  std::optional<uint64_t> peak_used_bytes;
  int64_t peak_offset_ns = 0;
  /// The agent's settled driver breakdown in the sample of that peak: the non-PyTorch bytes at
  /// the peak, named. Empty when that sample carried none (no agent, no settled pairing yet, a
  /// recording older than format 4).
  std::optional<DriverBreakdown> parts_at_peak;
  /// Agent peaks; empty when no agent published for this process.
  std::optional<uint64_t> torch_peak_allocated_bytes;
  std::optional<uint64_t> torch_peak_reserved_bytes;
  /// Highest step number seen and the largest per-step allocated peak.
  std::optional<uint64_t> step_count;
  std::optional<uint64_t> max_step_peak_allocated_bytes;
  /// Of the steps that carry categories, the one with the highest requested peak: its number
  /// and what that peak was made of. Empty when the process tracked no categories.
  std::optional<uint64_t> category_step;
  std::optional<uint64_t> category_step_peak_requested_bytes;
  std::optional<CategoryBytes> category_step_bytes;
  /// Did its agent poll in any sample (no allocator events), so that its torch and step peaks
  /// are the highest its polls saw, at least what is shown? And the last reason it gave (empty
  /// when it did not say, or a recording older than format 5).
  bool peaks_sampled = false;
  std::string polling_reason;
};

/// What one summary keeps at most, whatever the recording holds: a forged file may name new
/// GPUs or pids in every sample, each with a 64 KiB command, in a few bytes apiece. Entries past
/// a cap are not kept (omitted() says so), and a command or name that does not fit the string
/// budget keeps its earlier value. Together with the fixed parts, about 40 MiB.
inline constexpr std::size_t max_summary_devices = 1024;
inline constexpr std::size_t max_summary_processes = 16384;
inline constexpr std::size_t max_summary_text_bytes = 16U << 20U;

/// Peaks and counts of a whole recording.
class RecordingSummary {
 public:
  /// Folds one sample in (samples must come in recording order).
  void add(const SystemSample& sample);
  /// Folds in the summary of the samples that follow this one's (a later segment), with the
  /// same result as add()ing them (summary_digest.cpp).
  void merge(const RecordingSummary& later);
  /// Compact bytes of this summary, and back (nullopt for bytes that are not one).
  std::string serialize() const;
  static std::optional<RecordingSummary> parse(std::string_view bytes);

  uint64_t sample_count() const { return m_sample_count; }
  /// First and last sample timestamps (CLOCK_REALTIME ns); 0 when empty.
  int64_t start_ns() const { return m_start_ns; }
  int64_t end_ns() const { return m_end_ns; }
  uint64_t oom_count() const { return m_oom_count; }
  /// By device uuid.
  const std::map<std::string, DevicePeak>& devices() const { return m_devices; }
  /// By (pid, device uuid).
  const std::map<std::pair<uint32_t, std::string>, ProcessPeak>& processes() const {
    return m_processes;
  }
  /// Were GPUs or processes left out because a cap was reached (max_summary_*)?
  bool omitted() const { return m_omitted; }

 private:
  /// The entry of a GPU or a process, made when the caps allow; null (and m_omitted set) when
  /// they do not. `position` (the device's in the sample) and `row` (the process's place in
  /// add()'s walk of a sample) say where the previous sample's entry is tried first (npos:
  /// nowhere).
  DevicePeak* device(const std::string& uuid, std::size_t position = std::string::npos);
  ProcessPeak* process(uint32_t pid, const std::string& uuid, uint32_t device_index,
                       std::size_t row = std::string::npos, const DevicePeak* gpu = nullptr);
  /// Sets a kept name or command to `value` when the string budget allows.
  void set_text(std::string& field, const std::string& value);

  uint64_t m_sample_count = 0;
  int64_t m_start_ns = 0;
  int64_t m_end_ns = 0;
  uint64_t m_oom_count = 0;
  std::map<std::string, DevicePeak> m_devices;
  std::map<std::pair<uint32_t, std::string>, ProcessPeak> m_processes;
  /// Bytes of uuids (keys included), names and commands kept (bounded by
  /// max_summary_text_bytes).
  std::size_t m_text_bytes = 0;
  bool m_omitted = false;

  /// The entry a row of add()'s walk found, and the entry of its GPU then (which stands for
  /// the GPU's uuid: entries are kept by uuid).
  struct RowEntry {
    ProcessPeak* process = nullptr;
    const DevicePeak* gpu = nullptr;
  };
  /// What add() keeps from one sample to the next so that a steady recording's samples
  /// allocate nothing: the join's rows, the entry each device and row of the walk found last
  /// time, this sample's GPU entries, and the key of a map lookup. A copy starts afresh (the
  /// entries belong to the summary copied).
  struct Scratch {
    Scratch() = default;
    Scratch(const Scratch& /*other*/) {}
    Scratch& operator=(const Scratch& /*other*/) {
      devices.clear();
      rows.clear();
      gpus.clear();
      return *this;
    }
    ~Scratch() = default;
    Joiner joiner;
    std::vector<DevicePeak*> devices;
    std::vector<RowEntry> rows;
    std::vector<const DevicePeak*> gpus;
    std::pair<uint32_t, std::string> key;
  };
  Scratch m_scratch;
};

/// The SegmentDigest of `vramscope record`: each segment's RecordingSummary, serialized, so that
/// `show` merges the digests of the index instead of reading every sample.
class SummaryDigest final : public SegmentDigest {
 public:
  void add(const SystemSample& sample) override { m_summary.add(sample); }
  std::string take() override;

 private:
  RecordingSummary m_summary;
};

/// How the file ended, as `show` reports it.
struct RecordingTail {
  TailState state = TailState::Clean;
  std::string message;
};

/// Summarises a recording from its first sample (`reader` freshly opened), folding in every
/// sample; `tail` gets how the samples ended. The digests in the file's index are not used: a
/// digest is what its writer claimed, and only reading the samples checks it (a forged or
/// misplaced one, e.g. of a second file appended, names peaks that no sample holds), while
/// reading them is most of the cost of summarising them.
RecordingSummary summarise_recording(RecordingReader& reader, RecordingTail& tail);

/// "clean", "truncated" or "corrupt".
const char* tail_state_name(TailState state);

/// The human summary (local times, MiB like nvidia-smi), one '\n'-terminated line each.
std::string format_summary_text(const std::string& path, const RecordingMetadata& metadata,
                                const RecordingSummary& summary, const RecordingTail& tail);

/// The same as one JSON document (schema_version 1, documented in docs/json-schema.md).
std::string format_summary_json(const std::string& path, const RecordingMetadata& metadata,
                                const RecordingSummary& summary, const RecordingTail& tail);

}  // namespace vramscope::report
