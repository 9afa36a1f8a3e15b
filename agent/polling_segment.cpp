// agent/polling_segment.cpp -- the segment of a process that polls (see polling_segment.hpp)
#include "polling_segment.hpp"

#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "vramscope/clock.hpp"
#include "vramscope/format/agent_segments.hpp"

namespace vramscope::agent {

void PollingSegment::open(std::string_view reason, std::vector<std::string> device_uuids,
                          int32_t rank, int32_t world_size) {
  const auto pid = static_cast<uint32_t>(::getpid());
  // Created before the old one goes: its rename replaces the file under the same name.
  std::unique_ptr<AgentSegmentWriter> writer =
      open_agent_segment_writer(pid, static_cast<uint32_t>(device_uuids.size()));
  writer->set_polling_reason(reason);
  std::lock_guard lock(m_mutex);
  m_writer = std::move(writer);
  m_uuids = std::move(device_uuids);
  m_rank = rank;
  m_world_size = world_size;
  m_creator_pid = ::getpid();
}

void PollingSegment::publish(std::size_t device, AllocatorSample sample) {
  std::lock_guard lock(m_mutex);
  if (!m_writer || ::getpid() != m_creator_pid) return;
  if (device >= m_uuids.size()) {
    throw std::out_of_range("CUDA device " + std::to_string(device) +
                            " has no slot: " + std::to_string(m_uuids.size()) + " published");
  }
  sample.pid = static_cast<uint32_t>(m_creator_pid);
  sample.rank = m_rank;
  sample.world_size = m_world_size;
  sample.cuda_device = static_cast<int32_t>(device);
  sample.device_uuid = m_uuids[device];
  sample.polling_only = true;
  sample.updated_ns = wall_time_ns();
  m_writer->publish(static_cast<uint32_t>(device), sample);
}

void PollingSegment::set_rank(int32_t rank, int32_t world_size) {
  std::lock_guard lock(m_mutex);
  m_rank = rank;
  m_world_size = world_size;
}

std::string PollingSegment::path() const {
  std::lock_guard lock(m_mutex);
  return m_writer ? m_writer->path() : std::string();
}

void PollingSegment::close() {
  std::lock_guard lock(m_mutex);
  m_writer.reset();
}

}  // namespace vramscope::agent
