// agent/agent_thread.hpp -- the background thread that ticks the agent core
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "vramscope/tracking/agent_core.hpp"

namespace vramscope::agent {

/// Calls AgentCore::tick() every interval until stopped. It never takes the GIL: a thread that
/// waited for the GIL could stall behind the trainer, and the trainer could block on us.
class AgentThread {
 public:
  /// Starts ticking `core` (which must outlive the thread) every `interval_ns`.
  AgentThread(tracking::AgentCore& core, int64_t interval_ns);
  ~AgentThread();
  AgentThread(const AgentThread&) = delete;
  AgentThread& operator=(const AgentThread&) = delete;

  /// Stops and joins the thread (idempotent); returns promptly, not after a full interval.
  void stop();

 private:
  void run();

  tracking::AgentCore& m_core;
  int64_t m_interval_ns;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::thread m_thread;
};

}  // namespace vramscope::agent
