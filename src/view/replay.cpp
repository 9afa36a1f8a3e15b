// src/view/replay.cpp -- a cursor over a recording for `top --replay`: step, seek, timed playback
#include "vramscope/view/replay.hpp"

#include <algorithm>
#include <cmath>

#include "vramscope/clock.hpp"
#include "vramscope/status.hpp"

namespace vramscope::view {

uint64_t peak_sample_index(RecordingReader& reader) {
  uint64_t peak_index = 0;
  uint64_t peak_used_bytes = 0;
  SystemSample sample;
  for (uint64_t index = 0; reader.next(sample); ++index) {
    uint64_t used_bytes = 0;
    for (const DeviceSample& device : sample.devices) used_bytes += device.used_bytes.value_or(0);
    if (used_bytes > peak_used_bytes) {
      peak_used_bytes = used_bytes;
      peak_index = index;
    }
  }
  return peak_index;
}

ReplayCursor::ReplayCursor(RecordingOpener opener, std::size_t window)
    : m_opener(std::move(opener)), m_window_capacity(std::max<std::size_t>(window, 2)) {
  m_reader = m_opener();
  if (!m_reader) throw Error("cannot open the recording");
  m_metadata = m_reader->metadata();
  m_segments = m_reader->segments();
  uint64_t first = 0;
  for (const RecordingSegment& segment : m_segments) {
    m_segment_first.push_back(first);
    first += segment.sample_count;
  }
  if (!read_more()) {
    std::string why = "the recording holds no sample";
    if (!m_tail_message.empty()) why += " (" + m_tail_message + ")";
    throw Error(why);
  }
  m_anchor_recorded_ns = current().timestamp_ns;
}

const SystemSample& ReplayCursor::current() const {
  return m_window[static_cast<std::size_t>(m_position - m_window_first)];
}

std::vector<const SystemSample*> ReplayCursor::recent(std::size_t n) const {
  const std::size_t end = static_cast<std::size_t>(m_position - m_window_first) + 1;
  const std::size_t begin = end > n ? end - n : 0;
  std::vector<const SystemSample*> out;
  out.reserve(end - begin);
  for (std::size_t i = begin; i < end; ++i) out.push_back(&m_window[i]);
  return out;
}

bool ReplayCursor::read_more() {
  if (m_count) return false;
  SystemSample sample;
  if (!m_reader->next(sample)) {
    m_count = m_window_first + m_window.size();
    if (m_reader->tail_state() != TailState::Clean) m_tail_message = m_reader->tail_message();
    return false;
  }
  m_window.push_back(std::move(sample));
  // Drop the oldest sample, but never the one shown.
  if (m_window.size() > m_window_capacity && m_position > m_window_first) {
    m_window.pop_front();
    ++m_window_first;
  }
  return true;
}

bool ReplayCursor::step_forward() {
  if (m_position + 1 >= m_window_first + m_window.size() && !read_more()) return false;
  ++m_position;
  return true;
}

bool ReplayCursor::step_back() {
  if (m_position == 0) return false;
  seek(m_position - 1);
  return true;
}

bool ReplayCursor::jump_near(uint64_t index) {
  // Land some samples before the target when possible, so that steps back stay in memory.
  const uint64_t lead = std::min<uint64_t>(index, m_window_capacity / 2);
  std::size_t found = m_segments.size();
  for (std::size_t i = 0; i < m_segments.size() && m_segment_first[i] <= index - lead; ++i)
    found = i;
  if (found == m_segments.size()) return false;
  const uint64_t first = m_segment_first[found];
  const bool before_window = index < m_window_first;
  const bool past_window = first > m_window_first + m_window.size();
  if (!before_window && !past_window) return false;
  m_reader = m_opener();
  if (!m_reader) throw Error("cannot reopen the recording");
  m_reader->seek(m_segments[found].offset);
  m_window.clear();
  m_window_first = first;
  m_position = first;
  m_count.reset();
  m_tail_message.clear();
  if (!read_more()) {
    // The segment did not read after all: forget the index and read from the start.
    m_segments.clear();
    m_segment_first.clear();
    m_reader = m_opener();
    if (!m_reader) throw Error("cannot reopen the recording");
    m_window_first = 0;
    m_position = 0;
    m_count.reset();
    m_tail_message.clear();
    read_more();
  }
  return true;
}

void ReplayCursor::seek(uint64_t index) {
  if (jump_near(index)) {
    // Read on from the segment's first sample below.
  } else if (index < m_window_first) {
    // Before the window: read the file again from its start, keeping the samples just
    // before the target so that further steps back stay in memory.
    m_reader = m_opener();
    if (!m_reader) throw Error("cannot reopen the recording");
    m_window.clear();
    m_window_first = 0;
    m_position = 0;
    m_count.reset();
    m_tail_message.clear();
    if (!read_more()) return;
  }
  while (m_position < index) {
    if (!step_forward()) break;
  }
  if (index < m_position) m_position = index;
  m_anchor_recorded_ns = current().timestamp_ns;
}

void ReplayCursor::seek_end() {
  if (!m_segments.empty()) jump_near(m_segment_first.back());
  while (step_forward()) {
  }
  m_anchor_recorded_ns = current().timestamp_ns;
}

void ReplayCursor::anchor(int64_t now_ns) {
  m_anchor_recorded_ns = current().timestamp_ns;
  m_anchor_monotonic_ns = now_ns;
}

void ReplayCursor::set_playing(bool playing, int64_t now_ns) {
  m_playing = playing;
  anchor(now_ns);
}

void ReplayCursor::set_speed(double speed, int64_t now_ns) {
  // NaN passes every comparison std::clamp makes: playback would never advance.
  m_speed = std::isnan(speed) ? 1.0 : std::clamp(speed, min_replay_speed, max_replay_speed);
  anchor(now_ns);
}

void ReplayCursor::faster(int64_t now_ns) { set_speed(m_speed * 2.0, now_ns); }

void ReplayCursor::slower(int64_t now_ns) { set_speed(m_speed / 2.0, now_ns); }

std::size_t ReplayCursor::advance(int64_t now_ns) {
  if (!m_playing) return 0;
  if (m_anchor_monotonic_ns == 0) anchor(now_ns);
  const auto elapsed =
      static_cast<double>(saturating_sub_ns(now_ns, m_anchor_monotonic_ns)) * m_speed;
  // Saturating: a recording may hold any timestamp, right up to the ends of the int64 range.
  const int64_t recorded_now = saturating_add_ns(m_anchor_recorded_ns, clamp_to_ns(elapsed));
  std::size_t moved = 0;
  while (true) {
    if (m_position + 1 >= m_window_first + m_window.size() && !read_more()) {
      m_playing = false;  // the end: stay on the last sample
      break;
    }
    const SystemSample& next = m_window[static_cast<std::size_t>(m_position + 1 - m_window_first)];
    // A sample stamped before its predecessor (clock stepped back) is shown at once.
    if (next.timestamp_ns > recorded_now && next.timestamp_ns >= current().timestamp_ns) break;
    ++m_position;
    ++moved;
  }
  // The anchor stays where playback started so that rounding never accumulates.
  return moved;
}

std::optional<int64_t> ReplayCursor::next_due_ns() {
  if (!m_playing) return std::nullopt;
  if (m_position + 1 >= m_window_first + m_window.size() && !read_more()) return std::nullopt;
  const SystemSample& next = m_window[static_cast<std::size_t>(m_position + 1 - m_window_first)];
  const auto wait =
      static_cast<double>(saturating_sub_ns(next.timestamp_ns, m_anchor_recorded_ns)) / m_speed;
  return saturating_add_ns(m_anchor_monotonic_ns, clamp_to_ns(std::ceil(wait)));
}

}  // namespace vramscope::view
