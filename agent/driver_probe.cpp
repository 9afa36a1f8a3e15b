// agent/driver_probe.cpp -- the driver's bytes for one pid on one GPU, and the pairing thread (see driver_probe.hpp)
#include "driver_probe.hpp"

#include <pthread.h>

#include <chrono>

#include "vramscope/clock.hpp"

namespace vramscope::agent {

std::optional<uint64_t> DriverProbe::process_bytes(const std::string& uuid, uint32_t pid) {
  std::lock_guard lock(m_mutex);
  if (!m_opened) {
    m_opened = true;
    m_probe = nvml::ProcessMemoryProbe::open("", m_error);
  }
  if (!m_probe) return std::nullopt;
  return m_probe->used_bytes(uuid, pid);
}

std::string DriverProbe::error() {
  std::lock_guard lock(m_mutex);
  return m_error;
}

std::optional<uint64_t> AgentDriverSource::process_bytes(std::size_t device) {
  if (device >= m_uuids.size() || m_uuids[device].empty()) return std::nullopt;
  return m_probe.process_bytes(m_uuids[device], m_pid);
}

std::optional<uint64_t> AgentDriverSource::allocation_bytes(std::size_t device) {
  return m_allocations.bytes(static_cast<int>(device));
}

DriverThread::DriverThread(tracking::DriverPairing& pairing)
    : m_pairing(pairing), m_thread([this] { run(); }) {}

DriverThread::~DriverThread() { stop(); }

void DriverThread::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
  }
  m_wake.notify_all();
  if (m_thread.joinable()) m_thread.join();
}

void DriverThread::run() {
  ::pthread_setname_np(::pthread_self(), "vramscope-drv");
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    const int64_t now_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    int64_t due_ns = now_ns;
    try {
      due_ns = m_pairing.advance(now_ns, wall_time_ns());
    } catch (...) {
      // NVML or the walk failed in a way the pairing did not expect: try again later.
      due_ns = now_ns + 1'000'000'000;
    }
    lock.lock();
    const auto due = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(due_ns));
    m_wake.wait_until(lock, due, [this] { return m_stopping; });
  }
}

}  // namespace vramscope::agent
