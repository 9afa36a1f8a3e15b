// agent/agent_thread.hpp -- the agent's background threads: one loop that works, then sleeps until a deadline or a stop
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "vramscope/tracking/agent_core.hpp"
#include "vramscope/tracking/driver_pairing.hpp"

namespace vramscope::agent {

/// A named thread that calls `work` until stopped; `work` returns when to call it next. It
/// never takes the GIL: a thread that waited for the GIL could stall behind the trainer, and the
/// trainer could block on us.
class WorkerThread {
 public:
  using Clock = std::chrono::steady_clock;
  /// Starts calling `work` (whose captures must outlive the thread) on a thread named `name`
  /// (at most 15 characters, as Linux keeps them).
  WorkerThread(const char* name, std::function<Clock::time_point()> work);
  ~WorkerThread();
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  /// Stops and joins the thread (idempotent); returns promptly, not after a full wait.
  void stop();

 private:
  void run(const char* name);

  std::function<Clock::time_point()> m_work;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stopping = false;
  std::thread m_thread;
};

/// Calls AgentCore::tick() every interval (absolute deadlines, so that the time tick() takes
/// does not make the cadence drift; after a long pause it does not burst to catch up).
std::unique_ptr<WorkerThread> start_agent_thread(tracking::AgentCore& core, int64_t interval_ns);

/// Advances a DriverPairing (driver_pairing.hpp): it sleeps between the pairing's steps (a
/// guard time, the interval), reads NVML and walks the address space on its own, so that
/// neither the allocator's callback nor the agent thread's tick ever waits for the driver.
std::unique_ptr<WorkerThread> start_driver_thread(tracking::DriverPairing& pairing);

}  // namespace vramscope::agent
