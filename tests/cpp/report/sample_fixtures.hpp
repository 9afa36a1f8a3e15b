// tests/cpp/report/sample_fixtures.hpp -- SystemSamples built by hand for the formatter tests
#pragma once

#include <cstdint>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope::testing {

inline constexpr uint64_t mib = 1024ULL * 1024ULL;

/// An H200-like device: 143771 MiB total, v2 memory numbers, no processes yet.
inline DeviceSample make_device(uint32_t index, std::string name = "NVIDIA H200") {
  DeviceSample d;
  d.index = index;
  d.name = std::move(name);
  d.uuid = "GPU-0000000" + std::to_string(index) + "-aaaa-bbbb-cccc-dddddddddddd";
  d.pci_bus_id = "00000000:0" + std::to_string(index + 1) + ":00.0";
  d.total_bytes = 143771 * mib;
  d.reserved_bytes = 521 * mib;
  d.used_bytes = 40960 * mib + 12345;  // not a whole MiB: the table must floor
  d.free_bytes = *d.total_bytes - *d.reserved_bytes - *d.used_bytes;
  d.memory_v2 = true;
  d.bar1_total_bytes = 262144 * mib;
  d.bar1_used_bytes = 2 * mib;
  d.mig_enabled = false;
  d.processes_supported = true;
  return d;
}

inline ProcessSample make_process(uint32_t pid, uint64_t used_mib, bool visible = true,
                                  std::string command = "python train.py --lr 3e-4") {
  ProcessSample p;
  p.pid = pid;
  p.used_bytes = used_mib * mib;
  p.kinds = ProcessKindCompute;
  p.visible = visible;
  if (visible) {
    p.user = "alice";
    p.command = std::move(command);
  }
  return p;
}

inline AllocatorSample make_allocator(uint32_t pid, const DeviceSample& device,
                                      uint64_t allocated_mib, uint64_t reserved_mib) {
  AllocatorSample a;
  a.pid = pid;
  a.device_uuid = device.uuid;
  a.allocated_bytes = allocated_mib * mib;
  a.reserved_bytes = reserved_mib * mib;
  a.requested_bytes = a.allocated_bytes;
  a.active_bytes = a.allocated_bytes;
  a.peak_allocated_bytes = a.allocated_bytes;
  a.peak_reserved_bytes = a.reserved_bytes;
  a.updated_ns = 1'700'000'000'000'000'000;
  return a;
}

/// Two GPUs: GPU 0 runs a training process with an agent and a plain process; GPU 1 is idle.
inline SystemSample make_two_gpu_sample() {
  SystemSample s;
  s.timestamp_ns = 1'700'000'000'123'456'789;
  s.hostname = "node-7";
  s.driver_version = "580.95.05";
  DeviceSample gpu0 = make_device(0);
  gpu0.processes.push_back(make_process(4021, 30000));
  gpu0.processes.push_back(make_process(5177, 900, true, "/usr/bin/Xorg :0"));
  s.devices.push_back(gpu0);
  s.devices.push_back(make_device(1));
  AllocatorSample trainer = make_allocator(4021, gpu0, 20480, 24576);
  // The agent's settled pairing: 30000 MiB = 24576 reserved + 4810 other + 614 context, NCCL
  // 2.28.9 not reporting (its bytes in other), 34 MiB of reserved in a CUDA graph's pool.
  DriverBreakdown parts;
  parts.paired_ns = 1'699'999'999'500'000'000;
  parts.driver_bytes = 30000 * mib;
  parts.reserved_bytes = 24576 * mib;
  parts.private_pool_bytes = 34 * mib;
  parts.other_bytes = 4810 * mib;
  parts.context_bytes = 614 * mib;
  parts.first_context_bytes = 518 * mib;
  parts.nccl_version = 22809;
  parts.unsettled_count = 3;
  trainer.breakdown = parts;
  s.allocators.push_back(trainer);
  return s;
}

}  // namespace vramscope::testing
