// agent/agent_thread.cpp -- fixed-cadence ticking with prompt shutdown
#include "agent_thread.hpp"

#include <pthread.h>

#include <chrono>

namespace vramscope::agent {

AgentThread::AgentThread(tracking::AgentCore& core, int64_t interval_ns)
    : m_core(core), m_interval_ns(interval_ns), m_thread([this] { run(); }) {}

AgentThread::~AgentThread() { stop(); }

void AgentThread::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void AgentThread::run() {
  ::pthread_setname_np(::pthread_self(), "vramscope-agent");
  // Absolute deadlines so that the time tick() takes does not make the cadence drift.
  auto deadline = std::chrono::steady_clock::now();
  const auto interval = std::chrono::nanoseconds(m_interval_ns);
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    lock.unlock();
    m_core.tick();
    lock.lock();
    deadline += interval;
    const auto now = std::chrono::steady_clock::now();
    if (deadline < now) deadline = now;  // fell behind (a long GC pause): do not burst
    m_wake.wait_until(lock, deadline, [this] { return m_stopping; });
  }
}

}  // namespace vramscope::agent
