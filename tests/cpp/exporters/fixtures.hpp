// tests/cpp/exporters/fixtures.hpp -- SystemSamples built by hand for the exporter tests and benches
//
// Values are chosen so that every family and branch is exercised: a MIG GPU, an unsupported
// field, a lost GPU, label values that need escaping, two ranks of a distributed job.
#pragma once

#include <cstdint>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope::test {

inline constexpr uint64_t gib = 1ULL << 30U;
inline constexpr uint64_t mib = 1ULL << 20U;

/// A full host: GPU 0 (two torch ranks and a foreign process), GPU 1 with MIG, GPU 2 lost.
inline SystemSample make_rich_sample(int64_t timestamp_ns = 1700000000000000000) {
  SystemSample s;
  s.timestamp_ns = timestamp_ns;
  s.hostname = "node-01";
  s.driver_version = "580.159.03";

  DeviceSample gpu0;
  gpu0.index = 0;
  gpu0.name = "NVIDIA H200";
  gpu0.uuid = "GPU-11111111-2222-3333-4444-555555555555";
  gpu0.pci_bus_id = "00000000:18:00.0";
  gpu0.total_bytes = 143771 * mib;
  gpu0.reserved_bytes = 537 * mib;
  gpu0.used_bytes = 40 * gib;
  gpu0.free_bytes = *gpu0.total_bytes - *gpu0.reserved_bytes - *gpu0.used_bytes;
  gpu0.memory_v2 = true;
  gpu0.bar1_total_bytes = 256 * gib;
  gpu0.bar1_used_bytes = 12 * mib;
  gpu0.mig_enabled = false;
  gpu0.processes_supported = true;
  ProcessSample p1;
  p1.pid = 4242;
  p1.used_bytes = 20 * gib;
  p1.kinds = ProcessKindCompute;
  p1.visible = true;
  p1.user = "alice";
  p1.command = "python train.py --cfg \"a b\"";
  ProcessSample p2 = p1;
  p2.pid = 4243;
  p2.used_bytes = 19 * gib;
  ProcessSample p3;
  p3.pid = 999;
  p3.kinds = ProcessKindGraphics;  // used_bytes unavailable (WDDM-like): must be omitted, never 0
  gpu0.processes = {p1, p2, p3};
  s.devices.push_back(gpu0);

  DeviceSample gpu1;
  gpu1.index = 1;
  gpu1.name = "NVIDIA A100 \"MIG\"\\x";  // escaping check: quote and backslash
  gpu1.uuid = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
  gpu1.pci_bus_id = "00000000:3B:00.0";
  gpu1.total_bytes = 80 * gib;
  gpu1.used_bytes = 10 * gib;  // v1 fallback: no reserved
  gpu1.free_bytes = 70 * gib;
  gpu1.mig_enabled = true;
  MigInstanceSample mig;
  mig.index = 0;
  mig.uuid = "MIG-0000aaaa-0000-0000-0000-000000000001";
  mig.gpu_instance_id = 1;
  mig.compute_instance_id = 0;
  mig.total_bytes = 20 * gib;
  mig.used_bytes = 5 * gib;
  mig.free_bytes = 15 * gib;
  gpu1.mig_instances.push_back(mig);
  gpu1.processes_supported = true;
  ProcessSample p4;
  p4.pid = 5000;
  p4.used_bytes = 5 * gib;
  p4.gpu_instance_id = 1;
  p4.compute_instance_id = 0;
  p4.kinds = ProcessKindCompute;
  gpu1.processes = {p4};
  s.devices.push_back(gpu1);

  DeviceSample gpu2;
  gpu2.index = 2;
  gpu2.name = "NVIDIA H200";
  gpu2.uuid = "GPU-99999999-9999-9999-9999-999999999999";
  gpu2.pci_bus_id = "00000000:5D:00.0";
  gpu2.lost = true;
  gpu2.error = "GPU is lost";
  s.devices.push_back(gpu2);

  for (int32_t rank = 0; rank < 2; ++rank) {
    AllocatorSample a;
    a.pid = static_cast<uint32_t>(4242 + rank);
    a.rank = rank;
    a.world_size = 2;
    a.cuda_device = 0;
    a.device_uuid = gpu0.uuid;
    a.allocated_bytes = (12 + static_cast<uint64_t>(rank)) * gib;
    a.reserved_bytes = 16 * gib;
    a.requested_bytes = a.allocated_bytes - 3 * mib;
    a.active_bytes = a.allocated_bytes + mib;
    a.inactive_split_bytes = 64 * mib;
    a.peak_allocated_bytes = 14 * gib;
    a.peak_reserved_bytes = 16 * gib;
    a.step = 7;
    a.step_peak_allocated_bytes = 13 * gib;
    a.step_peak_reserved_bytes = 16 * gib;
    a.oom_count = static_cast<uint64_t>(rank);
    a.event_count = 123456;
    a.updated_ns = timestamp_ns;
    if (rank == 0) {
      // Rank 0's agent has a settled pairing (NCCL 2.28.9 not reporting); rank 1's has none.
      DriverBreakdown parts;
      parts.paired_ns = timestamp_ns - 250'000'000;
      parts.driver_bytes = 16 * gib + 764 * mib;
      parts.reserved_bytes = 16 * gib;
      parts.private_pool_bytes = 0;
      parts.other_bytes = 64 * mib;
      parts.context_bytes = 700 * mib;
      parts.nccl_version = 22809;
      a.breakdown = parts;
    }
    s.allocators.push_back(a);

    StepRecord step;
    step.pid = a.pid;
    step.rank = rank;
    step.cuda_device = 0;
    step.device_uuid = gpu0.uuid;
    step.step = 7;
    step.end_ns = timestamp_ns - 1000000;
    step.duration_ns = 250000000;
    step.peak_allocated_bytes = 13 * gib;
    step.peak_reserved_bytes = 16 * gib;
    step.peak_requested_bytes = 13 * gib - mib;
    step.allocated_bytes = a.allocated_bytes;
    step.reserved_bytes = a.reserved_bytes;
    // Rank 0 tracks categories (Monitor(model=...)); rank 1 does not. They sum to the peak.
    if (rank == 0) {
      step.category_bytes = CategoryBytes{3 * gib, 3 * gib, 6 * gib, gib - 4 * mib, 3 * mib, 0};
    }
    s.steps.push_back(step);
  }
  OomRecord oom;
  oom.pid = 4243;
  oom.rank = 1;
  oom.device_uuid = gpu0.uuid;
  oom.timestamp_ns = timestamp_ns - 500000;
  oom.requested_bytes = 8 * gib;
  oom.device_total_bytes = *gpu0.total_bytes;
  oom.device_free_bytes = 2 * gib;
  oom.allocated_bytes = 13 * gib;
  oom.reserved_bytes = 16 * gib;
  s.ooms.push_back(oom);
  return s;
}

/// The scale case from the benchmarks: `gpus` H200s with `processes_per_gpu` processes each.
inline SystemSample make_large_sample(uint32_t gpus, uint32_t processes_per_gpu,
                                      int64_t timestamp_ns = 1700000000000000000) {
  SystemSample s;
  s.timestamp_ns = timestamp_ns;
  s.hostname = "node-large";
  s.driver_version = "580.159.03";
  for (uint32_t g = 0; g < gpus; ++g) {
    DeviceSample d;
    d.index = g;
    d.name = "NVIDIA H200";
    d.uuid = "GPU-00000000-0000-0000-0000-0000000000" + std::to_string(10 + g);
    d.pci_bus_id = "00000000:" + std::to_string(10 + g) + ":00.0";
    d.total_bytes = 143771 * mib;
    d.reserved_bytes = 537 * mib;
    d.used_bytes = processes_per_gpu * 512 * mib;
    d.free_bytes = *d.total_bytes - *d.reserved_bytes - *d.used_bytes;
    d.memory_v2 = true;
    d.processes_supported = true;
    for (uint32_t p = 0; p < processes_per_gpu; ++p) {
      ProcessSample proc;
      proc.pid = 10000 + g * 1000 + p;
      proc.used_bytes = 512 * mib;
      proc.kinds = ProcessKindCompute;
      d.processes.push_back(proc);
    }
    s.devices.push_back(d);
  }
  return s;
}

}  // namespace vramscope::test
