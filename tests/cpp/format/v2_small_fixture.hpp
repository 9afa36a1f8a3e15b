// tests/cpp/format/v2_small_fixture.hpp -- FROZEN: what tests/data/recordings/v2_small.vsrec holds
//
// Never edit these values: the checked-in file was generated from them (make_v2_small, see
// docs/recording-format.md) and every later vramscope must still read it back to exactly this.
// Version 2 added per-category bytes to step records: the v1 samples, plus a chunk whose steps
// carry categories (one process) and carry none (another).
#pragma once

#include <vector>

#include "format/v1_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::testing {

inline RecordingMetadata v2_small_metadata() {
  RecordingMetadata m = v1_small_metadata();
  m.writer_version = "0.2.0";
  return m;
}

/// The samples, grouped by the chunk they were flushed in.
inline std::vector<std::vector<SystemSample>> v2_small_chunks() {
  std::vector<std::vector<SystemSample>> chunks = v1_small_chunks();
  SystemSample steps = chunks[1][0];
  steps.timestamp_ns += 10'000'000'000;
  steps.ooms.clear();
  StepRecord tracked = steps.steps[0];
  tracked.step = 13;
  tracked.end_ns = steps.timestamp_ns - 30'000'000;
  tracked.category_bytes = CategoryBytes{5'368'709'120ULL, 5'368'709'120ULL, 10'737'418'240ULL,
                                         4'294'967'296ULL, 536'870'912ULL,   131'072ULL};
  StepRecord untracked = steps.steps[0];
  untracked.pid = 31338;
  untracked.step = 2;
  untracked.end_ns = steps.timestamp_ns - 5'000'000;
  steps.steps = {tracked, untracked};
  chunks.push_back({steps});
  return chunks;
}

}  // namespace vramscope::testing
