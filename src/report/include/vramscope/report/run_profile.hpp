// src/report/include/vramscope/report/run_profile.hpp -- one pass over a recording: its summary plus every step's peaks
//
// `diff` and `report` read recordings through here, so that they say exactly what `show` says
// (the same RecordingSummary) and read each file once.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "vramscope/format/recording.hpp"
#include "vramscope/join.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/report/step_peaks.hpp"

namespace vramscope::report {

/// What one recording says, as `show` and `diff` need it.
struct RunProfile {
  std::string path;
  RecordingMetadata metadata;
  RecordingSummary summary;
  RecordingTail tail;
  /// By (pid, device uuid), the same keys as summary.processes().
  std::map<std::pair<uint32_t, std::string>, ProcessSteps> steps;
};

/// Reads `path` once, folding every sample into a RunProfile and handing it to `also` (when
/// set) for callers that need more (the HTML report's timelines). Throws vramscope::Error for a
/// file that cannot be read at all; a torn or corrupt tail is reported in `tail`, not thrown.
RunProfile load_run_profile(
    const std::string& path,
    const std::function<void(const SystemSample&, const JoinResult&)>& also = {});

}  // namespace vramscope::report
