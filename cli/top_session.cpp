// cli/top_session.cpp -- where `vramscope top` gets its samples: the live sampler or a replay
#include "top_session.hpp"

#include <filesystem>
#include <string>
#include <utility>

#include "vramscope/clock.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {

namespace {

/// Samples on a fixed grid of deadlines; a slow sample skips ticks instead of piling them up.
class LiveSource final : public TopSource {
 public:
  LiveSource(std::unique_ptr<Sampler> sampler, int64_t interval_ns)
      : m_sampler(std::move(sampler)), m_interval_ns(interval_ns) {
    // The reader reports each foreign segment once; top cannot print to stderr under curses.
    m_sampler->set_warning_handler([this](const std::string& warning) { m_warning = warning; });
  }

  bool update(view::ViewModel& model, int64_t now_ns) override {
    if (now_ns < m_next_ns) return false;
    m_sampler->sample(m_sample);
    if (!m_warning.empty()) {
      model.notice = "vramscope: " + std::exchange(m_warning, {});
      m_notice_until_ns = now_ns + notice_ns;
    } else if (!model.notice.empty() && now_ns >= m_notice_until_ns) {
      model.notice.clear();
    }
    m_next_ns = m_next_ns == 0 ? now_ns + m_interval_ns : m_next_ns + m_interval_ns;
    if (m_next_ns <= now_ns) m_next_ns = now_ns + m_interval_ns;
    // Paused: the view stays frozen; samples are still taken so that the agents' steps and
    // OOMs are consumed and unpausing shows the present, not a backlog. Step breakdowns are
    // kept (not shown) so that the one shown after resuming is the latest.
    if (model.paused) {
      model.remember_steps(m_sample.steps);
      return false;
    }
    model.ingest(m_sample);
    return true;
  }

  std::optional<int64_t> next_due_ns() override { return m_next_ns; }

  bool on_key(char32_t key, bool, bool, view::ViewModel& model, int64_t) override {
    if (key != U' ') return false;
    model.paused = !model.paused;
    return true;
  }

 private:
  /// How long a notice stays in the footer.
  static constexpr int64_t notice_ns = 15'000'000'000;

  std::unique_ptr<Sampler> m_sampler;
  int64_t m_interval_ns;
  int64_t m_next_ns = 0;
  SystemSample m_sample;
  std::string m_warning;
  int64_t m_notice_until_ns = 0;
};

/// Plays a recording at its own pace, with stepping, seeking and speed keys.
class ReplaySource final : public TopSource {
 public:
  ReplaySource(const std::string& path, double speed, bool at_peak, view::ViewModel& model)
      : m_path(path), m_cursor([path] { return RecordingReader::open(path); }) {
    m_cursor.set_speed(speed, monotonic_ns());
    if (at_peak) {
      // The recording's peak, with the history leading up to it: one frame (a pipe, --once)
      // then tells the recording's story, where its first sample shows nothing running yet.
      m_cursor.seek(view::peak_sample_index(*RecordingReader::open(path)));
      for (const SystemSample* sample : m_cursor.recent(history_points)) model.ingest(*sample);
    } else {
      model.ingest(m_cursor.current());
    }
    publish_status(model);
  }

  bool update(view::ViewModel& model, int64_t now_ns) override {
    const std::size_t moved = m_cursor.advance(now_ns);
    if (moved > 0) {
      // Every stepped-over sample feeds the history, so fast playback loses no peaks.
      for (const SystemSample* sample : m_cursor.recent(moved)) model.ingest(*sample);
    }
    const bool changed = moved > 0 || model.paused == m_cursor.playing();
    publish_status(model);
    return changed;
  }

  std::optional<int64_t> next_due_ns() override { return m_cursor.next_due_ns(); }

  bool on_key(char32_t key, bool left, bool right, view::ViewModel& model,
              int64_t now_ns) override {
    const uint64_t before = m_cursor.position();
    if (key == U' ') {
      // At the end, play starts over rather than doing nothing.
      if (!m_cursor.playing() && m_cursor.at_end()) m_cursor.seek(0);
      m_cursor.set_playing(!m_cursor.playing(), now_ns);
    } else if (left || key == U',') {
      m_cursor.set_playing(false, now_ns);
      m_cursor.step_back();
    } else if (right || key == U'.') {
      m_cursor.set_playing(false, now_ns);
      m_cursor.step_forward();
    } else if (key == U'+' || key == U'=') {
      m_cursor.faster(now_ns);
    } else if (key == U'-' || key == U'_') {
      m_cursor.slower(now_ns);
    } else if (key == U'g') {
      m_cursor.seek(0);
    } else if (key == U'G') {
      m_cursor.seek_end();
    } else {
      return false;
    }
    const uint64_t after = m_cursor.position();
    if (after == before + 1) {
      model.ingest(m_cursor.current());
    } else if (after != before) {
      // A jump: rebuild the histories from the samples leading up to the new position.
      model.clear_history();
      for (const SystemSample* sample : m_cursor.recent(history_points)) model.ingest(*sample);
    }
    publish_status(model);
    return true;
  }

 private:
  static constexpr std::size_t history_points = 1024;

  void publish_status(view::ViewModel& model) {
    const auto& meta = m_cursor.metadata();
    view::ReplayStatus status;
    status.file = std::filesystem::path(m_path).filename().string();
    status.hostname = meta.hostname.empty() ? "?" : meta.hostname;
    status.recorded_ns = meta.created_ns;
    status.position = m_cursor.position() + 1;
    status.count = m_cursor.count();
    status.speed = m_cursor.speed();
    status.at_end = m_cursor.at_end();
    status.tail_message = m_cursor.tail_message();
    model.replay = status;
    model.paused = !m_cursor.playing();
  }

  std::string m_path;
  view::ReplayCursor m_cursor;
};

}  // namespace

std::unique_ptr<TopSource> make_live_source(std::unique_ptr<Sampler> sampler, int64_t interval_ns) {
  return std::make_unique<LiveSource>(std::move(sampler), interval_ns);
}

std::unique_ptr<TopSource> make_replay_source(const std::string& path, double speed, bool at_peak,
                                              view::ViewModel& model) {
  return std::make_unique<ReplaySource>(path, speed, at_peak, model);
}

}  // namespace vramscope::cli
