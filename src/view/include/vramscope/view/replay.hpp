// src/view/include/vramscope/view/replay.hpp -- a cursor over a recording for `top --replay`: step, seek, timed playback
//
// Recordings can hold millions of samples, so the cursor keeps only a window of recent samples
// in memory. Stepping forward reads on; stepping back inside the window is free; seeking before
// the window reopens the file and reads forward to the target (the reader has no index).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "vramscope/format/recording.hpp"

namespace vramscope::view {

/// Opens the recording from its first sample; called again to seek backwards.
using RecordingOpener = std::function<std::unique_ptr<RecordingReader>()>;

/// Slowest and fastest playback speeds.
inline constexpr double min_replay_speed = 0.25;
inline constexpr double max_replay_speed = 64.0;

/// 0-based index of the recording's peak: the first sample with the most driver-used memory
/// summed over its GPUs (what one frame of a recording should show: `top --replay --once`).
/// 0 for a recording without any used-memory reading. Reads `reader` to its end.
uint64_t peak_sample_index(RecordingReader& reader);

/// Position, window and playback clock of a replay.
class ReplayCursor {
 public:
  /// Opens the recording and reads its first sample; throws vramscope::Error when the file
  /// cannot be opened or holds no valid sample. Keeps up to `window` samples in memory.
  explicit ReplayCursor(RecordingOpener opener, std::size_t window = 4096);

  const RecordingMetadata& metadata() const { return m_metadata; }
  /// 0-based index of the sample shown.
  uint64_t position() const { return m_position; }
  /// Number of samples in the file, known once the end has been read.
  std::optional<uint64_t> count() const { return m_count; }
  /// Is the cursor on the last valid sample?
  bool at_end() const { return m_count && m_position + 1 == *m_count; }
  /// The sample shown.
  const SystemSample& current() const;
  /// Up to `n` samples ending with the current one, oldest first (for rebuilding histories).
  std::vector<const SystemSample*> recent(std::size_t n) const;
  /// One line about a torn or corrupt tail once the end was read; empty otherwise.
  const std::string& tail_message() const { return m_tail_message; }

  /// Moves one sample; false (and no move) at either end.
  bool step_forward();
  bool step_back();
  /// Moves to sample `index`, or to the last one when the file is shorter.
  void seek(uint64_t index);
  void seek_end();

  /// Is playback running (as opposed to paused)?
  bool playing() const { return m_playing; }
  /// Starts or pauses playback; `now_ns` is CLOCK_MONOTONIC.
  void set_playing(bool playing, int64_t now_ns);
  double speed() const { return m_speed; }
  /// Sets the speed, clamped to [min_replay_speed, max_replay_speed].
  void set_speed(double speed, int64_t now_ns);
  /// Doubles or halves the speed within [min_replay_speed, max_replay_speed].
  void faster(int64_t now_ns);
  void slower(int64_t now_ns);
  /// Steps forward to the last sample whose recorded time has come at monotonic `now_ns`;
  /// returns how many samples it moved. Playback stops at the end of the file.
  std::size_t advance(int64_t now_ns);
  /// Monotonic time at which the next sample is due; empty when paused or at the end.
  std::optional<int64_t> next_due_ns();

 private:
  /// Reads one more sample at the end of the window; false at the end of the file.
  bool read_more();
  /// Restarts the playback clock at the current sample.
  void anchor(int64_t now_ns);
  /// When the file's index has a segment starting after the window but at or before `index`
  /// (or the target lies before the window), reopens the file at the latest such segment, so
  /// that a seek reads one segment at most instead of everything before it. False when there is
  /// no index to use.
  bool jump_near(uint64_t index);

  /// The file's segments (RecordingReader::segments()) and the index of each one's first
  /// sample; empty for files without an index.
  std::vector<RecordingSegment> m_segments;
  std::vector<uint64_t> m_segment_first;
  RecordingOpener m_opener;
  std::unique_ptr<RecordingReader> m_reader;
  RecordingMetadata m_metadata;
  std::size_t m_window_capacity;
  std::deque<SystemSample> m_window;
  /// Index in the file of m_window.front().
  uint64_t m_window_first = 0;
  uint64_t m_position = 0;
  std::optional<uint64_t> m_count;
  std::string m_tail_message;
  bool m_playing = true;
  double m_speed = 1.0;
  /// Recorded time of the current sample and the monotonic time it was shown.
  int64_t m_anchor_recorded_ns = 0;
  int64_t m_anchor_monotonic_ns = 0;
};

}  // namespace vramscope::view
