// include/vramscope/agent_segment.hpp -- shared-memory segments: agents publish, CLI processes read
//
// One segment per monitored process in an owner-only directory. The writer (the agent thread in
// the trainer) never blocks on readers; readers validate everything and never block the writer.
// The byte layout is drawn in vramscope/format/agent_segment_layout.hpp and specified in
// docs/agent-segment.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/sample.hpp"

namespace vramscope {

/// Publishes one process's allocator stats. Owned by the agent thread; not thread-safe. Opened
/// by open_agent_segment_writer() (format: vramscope/format/agent_segments.hpp).
class AgentSegmentWriter {
 public:
  virtual ~AgentSegmentWriter() = default;
  /// Publishes the current stats of device `slot` (seqlock write; readers retry, never block us).
  virtual void publish(uint32_t slot, const AllocatorSample& sample) = 0;
  /// Appends a completed step to the segment's bounded ring of recent steps.
  virtual void push_step(const StepRecord& step) = 0;
  /// Appends an OOM to the segment's bounded ring of recent OOMs.
  virtual void push_oom(const OomRecord& oom) = 0;
  /// Says why the process's allocator numbers are polled (one line ending in its fix; empty:
  /// they are not), for every reader to show beside its polled slots. Cut at a UTF-8 character
  /// boundary to the segment's bound; rarely called (once, when the process learns it).
  virtual void set_polling_reason(std::string_view reason) = 0;
  /// Path of the segment file (removed by the destructor).
  virtual const std::string& path() const = 0;
};

/// Reads every live segment in a directory. Remembers what it returned so that steps and OOMs
/// are reported once; removes segments whose writer process is gone. Opened by
/// open_agent_segment_reader() (format); the Sampler (core) holds one.
class AgentSegmentReader {
 public:
  virtual ~AgentSegmentReader() = default;
  /// Fills `allocators` with the current stats of every device of every live agent, and appends
  /// steps and OOMs not returned by an earlier poll. Invalid or foreign files are skipped.
  virtual void poll(std::vector<AllocatorSample>& allocators, std::vector<StepRecord>& new_steps,
                    std::vector<OomRecord>& new_ooms) = 0;
  /// Steps / OOMs that live writers pushed but that were overwritten in their ring before this
  /// reader could return them (a reader polling too slowly), summed over all segments.
  virtual uint64_t lost_step_count() const { return 0; }
  virtual uint64_t lost_oom_count() const { return 0; }
  /// Messages about segments refused for a reason the user can act on (written by a vramscope
  /// of another segment format version; a segment directory that is not safely ours, which
  /// keeps every agent from publishing), each reported once; clears the list.
  virtual std::vector<std::string> take_warnings() { return {}; }
};

}  // namespace vramscope
