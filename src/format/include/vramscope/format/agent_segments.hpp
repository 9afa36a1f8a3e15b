// src/format/include/vramscope/format/agent_segments.hpp -- the agents' segment files: where they live, opening one to write or the folder to read
//
// The writer and reader interfaces are core's (vramscope/agent_segment.hpp: the agent core
// publishes through one, the Sampler polls one); format implements them over the byte layout of
// vramscope/format/agent_segment_layout.hpp (docs/agent-segment.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vramscope/agent_segment.hpp"

namespace vramscope {

/// Directory holding the segments: $VRAMSCOPE_SHM_DIR if set, else /dev/shm/vramscope-<uid>.
/// Created 0700 on first use by a writer.
std::string agent_segment_dir();

/// Creates the segment file for `pid` with room for `device_slots` CUDA devices (mode 0600).
/// Throws vramscope::Error on failure. `dir` empty means agent_segment_dir().
std::unique_ptr<AgentSegmentWriter> open_agent_segment_writer(uint32_t pid, uint32_t device_slots,
                                                              const std::string& dir = {});

/// A reader of every live segment in `dir` (empty means agent_segment_dir()). It lists the
/// directory again only when it changed, or when its last listing came sooner than
/// agent_dir_settle_ns after the directory's last change (a directory's timestamps are those
/// of a clock tick: a change in the same tick keeps them); between listings a poll reads the
/// segments it knows, each checked for its size and its writer's life.
std::unique_ptr<AgentSegmentReader> open_agent_segment_reader(const std::string& dir = {});

/// See open_agent_segment_reader: longer than the coarsest tick of a filesystem that keeps
/// owners and modes (a jiffy on tmpfs and ext4; a second on the coarsest).
constexpr int64_t agent_dir_settle_ns = 1'100'000'000;

}  // namespace vramscope
