// tests/cpp/format/test_data.hpp -- where the checked-in test files are, and polling a segment
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "vramscope/agent_segment.hpp"

namespace vramscope::testing {

/// A file of tests/data (VRAMSCOPE_TEST_DATA overrides the build's folder): e.g.
/// "recordings/v2_small.vsrec".
inline std::string test_data_path(const std::string& relative) {
  const char* data = std::getenv("VRAMSCOPE_TEST_DATA");
  return std::string(data != nullptr ? data : VRAMSCOPE_TEST_DATA_DIR) + "/" + relative;
}

/// What one AgentSegmentReader::poll() returned.
struct Polled {
  std::vector<AllocatorSample> allocators;
  std::vector<StepRecord> steps;
  std::vector<OomRecord> ooms;
};

inline Polled poll(AgentSegmentReader& reader) {
  Polled out;
  reader.poll(out.allocators, out.steps, out.ooms);
  return out;
}

}  // namespace vramscope::testing
