// cli/top_session.hpp -- where `vramscope top` gets its samples: the live sampler or a replay
//
// The main loop asks a source for whatever became due by now and when to ask next, so one loop
// with one deadline drives both the live view and a replay, and the model sees the same calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "vramscope/sampler.hpp"
#include "vramscope/view/model.hpp"
#include "vramscope/view/replay.hpp"

namespace vramscope::cli {

/// A source of frames for the live view.
class TopSource {
 public:
  virtual ~TopSource() = default;
  /// Ingests into `model` everything due at monotonic `now_ns`; true when the model changed.
  virtual bool update(view::ViewModel& model, int64_t now_ns) = 0;
  /// Monotonic time of the next update worth making; empty when nothing is scheduled.
  virtual std::optional<int64_t> next_due_ns() = 0;
  /// Handles a source-specific key (pause, replay stepping); true when it was one.
  virtual bool on_key(char32_t key, bool left, bool right, view::ViewModel& model,
                      int64_t now_ns) = 0;
};

/// Samples the driver and the agents every `interval_ns`.
std::unique_ptr<TopSource> make_live_source(std::unique_ptr<Sampler> sampler, int64_t interval_ns);

/// Replays the recording at `path` at `speed`, driven by its timestamps, from its first sample
/// or, `at_peak`, from its peak (view::peak_sample_index).
std::unique_ptr<TopSource> make_replay_source(const std::string& path, double speed, bool at_peak,
                                              view::ViewModel& model);

}  // namespace vramscope::cli
