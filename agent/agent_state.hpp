// agent/agent_state.hpp -- the attached agent: attach(), the tracker's entry points, shutdown
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "agent_thread.hpp"
#include "tracking/agent_core.hpp"

namespace vramscope::agent {

/// Everything attach() creates. Leaked on purpose: torch has no way to detach a trace tracker,
/// so the state it points at is never destroyed (see agent_state.cpp).
struct AgentState {
  std::unique_ptr<tracking::AgentCore> core;
  std::unique_ptr<AgentThread> thread;
  std::string mode;
  pid_t creator_pid = 0;
};

/// _agent.attach() (docs/agent-api.md): attaches the trace tracker and OOM observer to every
/// CUDA device, seeds the counters and starts the agent thread. Idempotent; returns the mode.
std::string attach(double interval_ms, bool publish, int rank, int world_size,
                   const std::vector<std::string>& device_uuids);
/// The attached state, or nullptr before attach().
AgentState* attached_or_null() noexcept;
/// The attached state; throws std::runtime_error before attach().
AgentState& attached();
/// `device` checked against the tracked devices (IndexError when out of range).
std::size_t checked_device(const AgentState& state, int device);
/// Stops the agent thread and removes the segment (registered with atexit). Does nothing in a
/// fork()ed child, which must not remove its parent's segment.
void shutdown();
/// Benchmark support: skip (true) or resume (false) the tracker callback's work; torch still
/// builds its TraceEntry. While paused no event is counted.
void pause_tracking(bool paused);

}  // namespace vramscope::agent
