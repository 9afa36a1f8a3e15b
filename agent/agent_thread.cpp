// agent/agent_thread.cpp -- the agent's background threads (see agent_thread.hpp)
#include "agent_thread.hpp"

#include <pthread.h>

#include <memory>

#include "vramscope/clock.hpp"

namespace vramscope::agent {

WorkerThread::WorkerThread(const char* name, std::function<Clock::time_point()> work)
    : m_work(std::move(work)), m_thread([this, name] { run(name); }) {}

WorkerThread::~WorkerThread() { stop(); }

void WorkerThread::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void WorkerThread::run(const char* name) {
  ::pthread_setname_np(::pthread_self(), name);
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    lock.unlock();
    const Clock::time_point next = m_work();
    lock.lock();
    m_wake.wait_until(lock, next, [this] { return m_stopping; });
  }
}

std::unique_ptr<WorkerThread> start_agent_thread(tracking::AgentCore& core, int64_t interval_ns) {
  const auto interval = std::chrono::nanoseconds(interval_ns);
  auto deadline = std::make_shared<WorkerThread::Clock::time_point>(WorkerThread::Clock::now());
  return std::make_unique<WorkerThread>("vramscope-agent", [&core, interval, deadline] {
    core.tick();
    *deadline += interval;
    const auto now = WorkerThread::Clock::now();
    if (*deadline < now) *deadline = now;  // fell behind (a long GC pause): do not burst
    return *deadline;
  });
}

std::unique_ptr<WorkerThread> start_driver_thread(tracking::DriverPairing& pairing) {
  return std::make_unique<WorkerThread>("vramscope-drv", [&pairing] {
    using Clock = WorkerThread::Clock;
    const int64_t now_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count();
    int64_t due_ns = now_ns + 1'000'000'000;
    try {
      due_ns = pairing.advance(now_ns, wall_time_ns());
    } catch (...) {
      // NVML or the walk failed in a way the pairing did not expect: try again in a second.
    }
    return Clock::time_point(std::chrono::nanoseconds(due_ns));
  });
}

}  // namespace vramscope::agent
