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

/// For each allocator, the position of the first device that its uuid names; npos when none
/// does.
std::vector<std::size_t> allocator_devices(const SystemSample& sample) {
  const std::unordered_map<std::string_view, std::size_t> owner = device_positions(sample);
  std::vector<std::size_t> out(sample.allocators.size(), std::string::npos);
  for (std::size_t a = 0; a < sample.allocators.size(); ++a) {
    const auto found = owner.find(sample.allocators[a].device_uuid);
    if (found != owner.end()) out[a] = found->second;
  }
  return out;
}

/// Fills the decomposition of a row that has an agent on `device`, and flags what does not add
/// up.
void decompose(const DeviceSample& device, JoinedProcess& row) {
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

JoinResult join_processes(const SystemSample& sample) {
  JoinResult result;
  std::vector<bool> allocator_used(sample.allocators.size(), false);
  // Each allocator joins the first device its uuid names (every agent of a device is used up
  // by the end of that device), and there the first process with its pid: found through
  // indexes, so that the join takes time linear in the sample (a forged one may hold 65,536
  // processes and as many agents).
  const std::vector<std::size_t> owners = allocator_devices(sample);
  std::vector<std::vector<std::size_t>> device_agents(sample.devices.size());
  for (std::size_t a = 0; a < owners.size(); ++a) {
    if (owners[a] != std::string::npos) device_agents[owners[a]].push_back(a);
  }

  for (std::size_t d = 0; d < sample.devices.size(); ++d) {
    const DeviceSample& device = sample.devices[d];
    JoinedDevice joined{d, {}};
    // Positions of this device's agents, in order; each joins at most one driver row.
    const std::vector<std::size_t>& agents = device_agents[d];
    std::unordered_map<uint32_t, std::vector<std::size_t>> agents_by_pid;
    for (std::size_t a : agents) agents_by_pid[sample.allocators[a].pid].push_back(a);
    std::unordered_map<uint32_t, std::size_t> next_by_pid;
    for (const ProcessSample& process : device.processes) {
      JoinedProcess row;
      row.driver = process;
      row.pid = process.pid;
      const auto same_pid = agents_by_pid.find(process.pid);
      if (same_pid != agents_by_pid.end()) {
        std::size_t& next = next_by_pid[process.pid];
        if (next < same_pid->second.size()) {
          const std::size_t a = same_pid->second[next++];
          allocator_used[a] = true;
          row.torch = sample.allocators[a];
          decompose(device, row);
        }
      }
      joined.processes.push_back(std::move(row));
    }
    // Agents left over: their pid is not in this device's list. Shown apart, never matched to
    // "the one unmatched process": a wrong guess would be worse than an honest gap.
    for (std::size_t a : agents) {
      if (allocator_used[a]) continue;
      allocator_used[a] = true;
      // An agent publishes a slot for every visible device; a DDP rank that never touched this
      // one has no context here, so it is rightly absent from the driver's list: no row.
      const AllocatorSample& agent = sample.allocators[a];
      if (agent.reserved_bytes == 0 && agent.peak_reserved_bytes == 0) continue;
      JoinedProcess row;
      row.torch = sample.allocators[a];
      row.pid = row.torch->pid;
      decompose(device, row);
      joined.processes.push_back(std::move(row));
    }
    result.any_torch = result.any_torch || !agents.empty();
    result.devices.push_back(std::move(joined));
  }

  for (std::size_t a = 0; a < sample.allocators.size(); ++a) {
    if (!allocator_used[a]) result.unmatched_allocators.push_back(sample.allocators[a]);
  }
  return result;
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
