// agent/polling_segment.hpp -- the segment of a process that polls: no torch-facing library, the numbers Python reads
//
// When no torch-facing library fits the imported torch (none carried, none compilable) or the
// agent cannot attach, vramscope's Python polls torch.cuda.memory_stats instead (its
// PollingReader). This extension -- which has no torch inside -- still publishes what those
// polls read, in the same segment format the agent uses, marked polled and with the reason
// (its fix included), so that `vramscope top`, the table and `record` show that process's
// numbers as sampled instead of showing none. Nothing here touches torch or the agent's
// allocator callbacks: the numbers come from Python, at its reads and steps.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/agent_segment.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::agent {

/// The polling process's one segment. Every call may come from any Python thread; a mutex
/// keeps them apart (the GIL does not, on a free-threaded build).
class PollingSegment {
 public:
  /// Creates this process's segment with one slot per entry of `device_uuids` (NVML's names of
  /// its CUDA devices) and writes `reason` in its note. Replaces a segment opened before.
  /// Throws vramscope::Error when it cannot be created (an unsafe segment directory).
  void open(std::string_view reason, std::vector<std::string> device_uuids, int32_t rank,
            int32_t world_size);
  /// Publishes `sample` (its counters as Python polled them) as CUDA device `device`, marked
  /// polled, with this process's rank and the device's UUID. Does nothing when not open or in a
  /// fork()ed child (a DataLoader worker's numbers are not its parent's); throws
  /// std::out_of_range for a device it has no slot for.
  void publish(std::size_t device, AllocatorSample sample);
  /// Changes the rank and world size put in later samples.
  void set_rank(int32_t rank, int32_t world_size);
  /// The segment file, or "" when not open.
  std::string path() const;
  /// Removes the segment (at exit; a fork()ed child never removes its parent's: the writer's
  /// rule).
  void close();

 private:
  mutable std::mutex m_mutex;
  std::unique_ptr<AgentSegmentWriter> m_writer;
  std::vector<std::string> m_uuids;
  int32_t m_rank = -1;
  int32_t m_world_size = -1;
  /// The process that opened the segment.
  pid_t m_creator_pid = 0;
};

}  // namespace vramscope::agent
