// src/core/join.cpp -- per-process join of the driver view (NVML) and the allocator view (agents)
#include "vramscope/join.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vramscope {
namespace {

/// How far a frame's driver reading may sit from reserved + the settled non-PyTorch bytes and
/// still count as settled: one 2 MiB page, the driver's granularity.
constexpr uint64_t settled_tolerance_bytes = uint64_t{2} << 20U;

/// Above this many (allocator, process or device) pairs a sample's agents find their processes
/// through maps; below it, scanning is cheaper than building them. Real samples are below: 8
/// GPUs with 64 processes and 8 agents make 576.
constexpr std::size_t max_scanned_pairs = 4096;

/// Is `sample` small enough to join its agents and processes by scanning (see
/// max_scanned_pairs)?
bool joins_by_scanning(const SystemSample& sample) {
  // Each process scans the agents, and so does each device for its agents left over.
  std::size_t scans = sample.devices.size();
  for (const DeviceSample& device : sample.devices) scans += device.processes.size();
  const std::size_t allocators = sample.allocators.size();
  return allocators == 0 || scans <= max_scanned_pairs / allocators;
}

/// Fills `owner` with, for each allocator, the position of the first device that its uuid
/// names (npos when none does).
void allocator_devices(const SystemSample& sample, std::vector<std::size_t>& owner) {
  const DevicePositions positions(sample);
  owner.resize(sample.allocators.size());
  for (std::size_t a = 0; a < sample.allocators.size(); ++a) {
    owner[a] = positions.find(sample.allocators[a].device_uuid);
  }
}

/// Fills the decomposition of a row that has an agent on `device`, and flags what does not add
/// up.
void decompose(const DeviceSample& device, JoinedRow& row) {
  const AllocatorSample& torch = *row.torch;
  // An allocator cannot hold more than the GPU has: such numbers come from a damaged or forged
  // segment, and no arithmetic is done with them.
  if (device.total_bytes && std::max({torch.allocated_bytes, torch.reserved_bytes,
                                      torch.peak_reserved_bytes}) > *device.total_bytes) {
    row.issues |= JoinIssueExceedsDeviceTotal;
    return;
  }
  if (torch.allocated_bytes <= torch.reserved_bytes) {
    row.cached_free_bytes = torch.reserved_bytes - torch.allocated_bytes;
  } else {
    row.issues |= JoinIssueAllocatedExceedsReserved;
  }
  if (!row.driver) {
    row.issues |= JoinIssuePidNotInDriverList;
    return;
  }
  if (!row.driver->used_bytes) {
    row.issues |= JoinIssueDriverUsedUnknown;
    return;
  }
  const uint64_t driver_used = *row.driver->used_bytes;
  if (torch.breakdown) {
    // The agent paired the driver with reserved while no segment moved: that is the
    // non-PyTorch memory. This frame's two readings, taken apart, may straddle a segment
    // (the peak is where memory moves fastest): then the frame is flagged, not believed.
    const uint64_t settled = torch.breakdown->non_pytorch_bytes();
    row.non_pytorch_bytes = settled;
    const uint64_t explained = torch.reserved_bytes + settled;
    const uint64_t gap = std::max(explained, driver_used) - std::min(explained, driver_used);
    if (gap > settled_tolerance_bytes) row.issues |= JoinIssueUnsettled;
    return;
  }
  if (torch.reserved_bytes <= driver_used) {
    row.non_pytorch_bytes = driver_used - torch.reserved_bytes;
  } else {
    row.issues |= JoinIssueReservedExceedsDriverUsed;
  }
}

}  // namespace

std::unordered_map<std::string_view, std::size_t> device_positions(const SystemSample& sample) {
  std::unordered_map<std::string_view, std::size_t> owner;
  for (std::size_t d = 0; d < sample.devices.size(); ++d) {
    const DeviceSample& device = sample.devices[d];
    if (!device.uuid.empty()) owner.emplace(device.uuid, d);
    for (const MigInstanceSample& mig : device.mig_instances) {
      if (!mig.uuid.empty()) owner.emplace(mig.uuid, d);
    }
  }
  return owner;
}

namespace {

/// The next row of `joined`, reusing one left from an earlier join; every field is set again.
JoinedRow& next_row(JoinedRows& joined, std::size_t& rows, std::size_t device_position) {
  if (rows == joined.rows.size()) joined.rows.emplace_back();
  JoinedRow& row = joined.rows[rows++];
  row = JoinedRow{};
  row.device_position = device_position;
  return row;
}

/// The join of `sample` into `joined`, whose vectors are reused; `owner` and `used` are
/// scratch.
void join_into(const SystemSample& sample, JoinedRows& joined, std::vector<std::size_t>& owner,
               std::vector<bool>& used) {
  joined.any_torch = false;
  joined.unmatched_allocators.clear();
  used.assign(sample.allocators.size(), false);
  // Each allocator joins the first device its uuid names (every agent of a device is used up
  // by the end of that device), and there the first process with its pid: the k-th process of
  // a pid takes the k-th agent of that pid on that device. Found by scanning when the sample is
  // small, else through indexes, so that the join takes time linear in the sample (a forged one
  // may hold 65,536 processes and as many agents).
  const bool scan = joins_by_scanning(sample);
  allocator_devices(sample, owner);
  std::vector<std::vector<std::size_t>> device_agents;
  if (!scan) {
    device_agents.resize(sample.devices.size());
    for (std::size_t a = 0; a < owner.size(); ++a) {
      if (owner[a] != std::string::npos) device_agents[owner[a]].push_back(a);
    }
  }
  std::size_t rows = 0;
  for (std::size_t d = 0; d < sample.devices.size(); ++d) {
    const DeviceSample& device = sample.devices[d];
    std::unordered_map<uint32_t, std::vector<std::size_t>> agents_by_pid;
    std::unordered_map<uint32_t, std::size_t> next_by_pid;
    if (!scan) {
      for (std::size_t a : device_agents[d]) agents_by_pid[sample.allocators[a].pid].push_back(a);
    }
    for (const ProcessSample& process : device.processes) {
      JoinedRow& row = next_row(joined, rows, d);
      row.driver = &process;
      row.pid = process.pid;
      std::size_t agent = std::string::npos;
      if (scan) {
        for (std::size_t a = 0; a < owner.size(); ++a) {
          if (owner[a] == d && !used[a] && sample.allocators[a].pid == process.pid) {
            agent = a;
            break;
          }
        }
      } else if (const auto same_pid = agents_by_pid.find(process.pid);
                 same_pid != agents_by_pid.end()) {
        std::size_t& next = next_by_pid[process.pid];
        if (next < same_pid->second.size()) agent = same_pid->second[next++];
      }
      if (agent == std::string::npos) continue;
      used[agent] = true;
      row.torch = &sample.allocators[agent];
      decompose(device, row);
    }
    // Agents left over: their pid is not in this device's list. Shown apart, never matched to
    // "the one unmatched process": a wrong guess would be worse than an honest gap.
    const auto leftover = [&](std::size_t a) {
      joined.any_torch = true;
      if (used[a]) return;
      used[a] = true;
      // An agent publishes a slot for every visible device; a DDP rank that never touched this
      // one has no context here, so it is rightly absent from the driver's list: no row.
      const AllocatorSample& agent = sample.allocators[a];
      if (agent.reserved_bytes == 0 && agent.peak_reserved_bytes == 0) return;
      JoinedRow& row = next_row(joined, rows, d);
      row.torch = &agent;
      row.pid = agent.pid;
      decompose(device, row);
    };
    if (scan) {
      for (std::size_t a = 0; a < owner.size(); ++a) {
        if (owner[a] == d) leftover(a);
      }
    } else {
      for (std::size_t a : device_agents[d]) leftover(a);
    }
  }
  joined.rows.resize(rows);
  for (std::size_t a = 0; a < sample.allocators.size(); ++a) {
    if (!used[a]) joined.unmatched_allocators.push_back(&sample.allocators[a]);
  }
}

}  // namespace

DevicePositions::DevicePositions(const SystemSample& sample) : m_sample(sample) {
  std::size_t uuids = 0;
  for (const DeviceSample& device : sample.devices) uuids += 1 + device.mig_instances.size();
  if (uuids > 16) m_positions = device_positions(sample);
}

std::size_t DevicePositions::find(std::string_view uuid) const {
  if (uuid.empty()) return none;
  if (m_positions) {
    const auto found = m_positions->find(uuid);
    return found == m_positions->end() ? none : found->second;
  }
  for (std::size_t d = 0; d < m_sample.devices.size(); ++d) {
    const DeviceSample& device = m_sample.devices[d];
    if (device.uuid == uuid) return d;
    for (const MigInstanceSample& mig : device.mig_instances) {
      if (mig.uuid == uuid) return d;
    }
  }
  return none;
}

void join_processes(const SystemSample& sample, Joiner& joiner, JoinResult& out) {
  const JoinedRows& joined = joiner.join(sample);
  out.any_torch = joined.any_torch;
  out.devices.resize(sample.devices.size());
  std::vector<std::size_t> rows(sample.devices.size(), 0);
  for (std::size_t d = 0; d < sample.devices.size(); ++d) out.devices[d].device_position = d;
  for (const JoinedRow& row : joined.rows) {
    std::vector<JoinedProcess>& processes = out.devices[row.device_position].processes;
    std::size_t& used = rows[row.device_position];
    if (used == processes.size()) processes.emplace_back();
    // Assigned over the row left from an earlier sample: its strings keep their memory.
    JoinedProcess& copy = processes[used++];
    if (row.driver != nullptr) {
      copy.driver = *row.driver;
    } else {
      copy.driver.reset();
    }
    if (row.torch != nullptr) {
      copy.torch = *row.torch;
    } else {
      copy.torch.reset();
    }
    copy.pid = row.pid;
    copy.cached_free_bytes = row.cached_free_bytes;
    copy.non_pytorch_bytes = row.non_pytorch_bytes;
    copy.issues = row.issues;
  }
  for (std::size_t d = 0; d < sample.devices.size(); ++d) out.devices[d].processes.resize(rows[d]);
  out.unmatched_allocators.resize(joined.unmatched_allocators.size());
  for (std::size_t a = 0; a < joined.unmatched_allocators.size(); ++a) {
    out.unmatched_allocators[a] = *joined.unmatched_allocators[a];
  }
}

JoinResult join_processes(const SystemSample& sample) {
  Joiner joiner;
  JoinResult result;
  join_processes(sample, joiner, result);
  return result;
}

const JoinedRows& Joiner::join(const SystemSample& sample) {
  join_into(sample, m_joined, m_owner, m_used);
  return m_joined;
}

std::string describe_join_issues(uint8_t issues) {
  std::string text;
  const auto add = [&](JoinIssue bit, const char* phrase) {
    if ((issues & bit) == 0) return;
    if (!text.empty()) text += "; ";
    text += phrase;
  };
  add(JoinIssuePidNotInDriverList, "pid not in driver list (container?)");
  add(JoinIssueReservedExceedsDriverUsed, "torch reserved > driver used");
  add(JoinIssueAllocatedExceedsReserved, "torch allocated > reserved");
  add(JoinIssueDriverUsedUnknown, "driver used N/A");
  add(JoinIssueExceedsDeviceTotal, "torch numbers > GPU total (damaged agent segment?)");
  add(JoinIssueUnsettled, "driver and torch read apart: non-PyTorch as last settled");
  return text;
}

}  // namespace vramscope
