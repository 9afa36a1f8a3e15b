// tests/cpp/format/v4_small_fixture.hpp -- FROZEN: what tests/data/recordings/v4_small.vsrec holds
//
// Never edit these values: the checked-in file was generated from them (make_v4_small, see
// docs/recording-format.md) and every later vramscope must still read it back to exactly this.
// Version 4 added the agent's settled driver breakdown to allocator records: the v2 samples,
// plus a chunk whose allocators carry a breakdown with every part, one with no optional part
// (and an excess), and none at all.
#pragma once

#include <vector>

#include "format/v2_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::testing {

inline RecordingMetadata v4_small_metadata() {
  RecordingMetadata m = v2_small_metadata();
  m.writer_version = "0.4.0";
  return m;
}

/// The samples, grouped by the chunk they were flushed in.
inline std::vector<std::vector<SystemSample>> v4_small_chunks() {
  std::vector<std::vector<SystemSample>> chunks = v2_small_chunks();
  SystemSample parts = chunks[1][0];  // two GPUs and an agent
  parts.timestamp_ns = chunks.back().back().timestamp_ns + 10'000'000'000;
  parts.steps.clear();
  parts.ooms.clear();
  AllocatorSample whole = parts.allocators[0];
  whole.updated_ns = parts.timestamp_ns - 2'000'000;
  DriverBreakdown all;
  all.paired_ns = parts.timestamp_ns - 180'000'000;
  all.reserved_bytes = whole.reserved_bytes;
  all.private_pool_bytes = 35'651'584ULL;
  all.nccl_bytes = 327'155'712ULL;
  all.other_bytes = 67'108'864ULL;
  all.context_bytes = 543'162'368ULL;
  all.first_context_bytes = 534'773'760ULL;
  all.driver_bytes = all.reserved_bytes + all.non_pytorch_bytes();
  all.nccl_version = 22'907U;
  all.unsettled_count = 3;
  whole.breakdown = all;
  AllocatorSample bare = whole;
  bare.pid = 31338;
  bare.cuda_device = 1;
  bare.device_uuid = parts.devices[1].uuid;
  DriverBreakdown least;
  least.paired_ns = parts.timestamp_ns - 40'000'000;
  least.reserved_bytes = bare.reserved_bytes;
  least.context_bytes = 0;
  least.excess_bytes = 2'097'152ULL;
  least.driver_bytes = least.reserved_bytes - least.excess_bytes;
  least.nccl_version = 22'809U;
  bare.breakdown = least;
  AllocatorSample none = whole;
  none.pid = 31339;
  none.breakdown.reset();
  parts.allocators = {whole, bare, none};
  SystemSample later = parts;
  later.timestamp_ns += 500'000'000;
  later.allocators[0].breakdown->paired_ns = later.timestamp_ns - 90'000'000;
  later.allocators[0].breakdown->unsettled_count = 4;
  chunks.push_back({parts, later});
  return chunks;
}

}  // namespace vramscope::testing
