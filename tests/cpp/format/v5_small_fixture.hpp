// tests/cpp/format/v5_small_fixture.hpp -- FROZEN: what tests/data/recordings/v5_small.vsrec holds
//
// Never edit these values: the checked-in file was generated from them (make_v5_small, see
// docs/recording-format.md) and every later vramscope must still read it back to exactly this.
// Version 5 added why a polling process polls to its allocator records: the v4 samples, plus a
// chunk with a polling process that says why (with a breakdown before the reason, and without
// one), one that polls without saying (an older agent), and one with exact numbers.
#pragma once

#include <vector>

#include "format/v4_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::testing {

inline RecordingMetadata v5_small_metadata() {
  RecordingMetadata m = v4_small_metadata();
  m.writer_version = "0.5.0";
  return m;
}

/// The samples, grouped by the chunk they were flushed in.
inline std::vector<std::vector<SystemSample>> v5_small_chunks() {
  std::vector<std::vector<SystemSample>> chunks = v4_small_chunks();
  SystemSample polled = chunks.back().back();  // two GPUs, three agents (two with breakdowns)
  polled.timestamp_ns += 10'000'000'000;
  AllocatorSample& paired = polled.allocators[0];
  paired.updated_ns = polled.timestamp_ns - 1'000'000;
  paired.polling_only = true;
  paired.polling_reason =
      "cudaMallocAsync allocator has no trace events (PYTORCH_CUDA_ALLOC_CONF=backend:native "
      "gives exact peaks)";
  AllocatorSample& unsaid = polled.allocators[1];
  unsaid.polling_only = true;
  AllocatorSample& python = polled.allocators[2];
  python.polling_only = true;
  python.polling_reason =
      "no C++ compiler (c++, g++ or clang++; or $CXX) to build the agent for torch "
      "2.16.0+cu130, which this vramscope carries none for; install one (Debian/Ubuntu: apt "
      "install g++; Fedora/RHEL: dnf install gcc-c++) \xE2\x80\x94 \xC3\xA9t\xC3\xA9";
  AllocatorSample exact = chunks.back().back().allocators[2];
  exact.pid = 31340;
  polled.allocators.push_back(exact);
  SystemSample later = polled;
  later.timestamp_ns += 500'000'000;
  later.allocators[2].step_peak_allocated_bytes += 4096;
  chunks.push_back({polled, later});
  return chunks;
}

}  // namespace vramscope::testing
