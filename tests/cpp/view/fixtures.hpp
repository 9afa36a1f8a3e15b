// tests/cpp/view/fixtures.hpp -- fixed SystemSamples for the view tests, goldens and benchmark
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope::view::fixtures {

inline constexpr uint64_t gib = 1ULL << 30U;
inline constexpr uint64_t mib = 1ULL << 20U;
/// 2026-01-02 03:04:05 UTC: every fixed sample starts here.
inline constexpr int64_t base_ns = 1767323045LL * 1'000'000'000LL;

/// A GPU with the v2 memory numbers of an H200-like device; `used` excludes driver-reserved.
inline DeviceSample device(uint32_t index, uint64_t used_bytes, std::string name = "NVIDIA H200") {
  DeviceSample d;
  d.index = index;
  d.name = std::move(name);
  d.uuid = "GPU-0000000" + std::to_string(index);
  d.total_bytes = 140 * gib;
  d.reserved_bytes = 512 * mib;
  d.used_bytes = used_bytes;
  d.free_bytes = *d.total_bytes - *d.reserved_bytes - used_bytes;
  d.memory_v2 = true;
  d.processes_supported = true;
  return d;
}

inline ProcessSample process(uint32_t pid, uint64_t used_bytes, std::string command,
                             std::string user = "alice") {
  ProcessSample p;
  p.pid = pid;
  p.used_bytes = used_bytes;
  p.kinds = ProcessKindCompute;
  p.visible = true;
  p.user = std::move(user);
  p.command = std::move(command);
  return p;
}

inline AllocatorSample agent(uint32_t pid, const DeviceSample& device, uint64_t allocated_bytes,
                             uint64_t reserved_bytes, int32_t rank = -1) {
  AllocatorSample a;
  a.pid = pid;
  a.rank = rank;
  a.device_uuid = device.uuid;
  a.allocated_bytes = allocated_bytes;
  a.reserved_bytes = reserved_bytes;
  a.step = 120;
  a.step_peak_allocated_bytes = allocated_bytes + 2 * gib;
  return a;
}

/// A finished step of `pid` on `device_uuid` whose requested peak is made of `categories`
/// (no breakdown when `categories` is empty).
inline StepRecord step(uint32_t pid, const std::string& device_uuid, uint64_t number,
                       std::optional<CategoryBytes> categories) {
  StepRecord r;
  r.pid = pid;
  r.device_uuid = device_uuid;
  r.step = number;
  r.end_ns = base_ns;
  r.duration_ns = 250'000'000;
  r.category_bytes = categories;
  if (categories) {
    for (const uint64_t bytes : *categories) r.peak_requested_bytes += bytes;
  }
  r.peak_allocated_bytes = r.peak_requested_bytes;
  r.peak_reserved_bytes = r.peak_requested_bytes;
  return r;
}

/// One GPU: a training process with an agent (12 GiB driver-used: 8 allocated, 2 cached,
/// 2 non-PyTorch) and a process without an agent (3 GiB). `t` moves time and usage a little.
inline SystemSample one_gpu(int t = 0) {
  SystemSample s;
  s.timestamp_ns = base_ns + t * 250'000'000LL;
  s.hostname = "node-a";
  s.driver_version = "580.95.05";
  DeviceSample d = device(0, 15 * gib + static_cast<uint64_t>(t % 8) * gib);
  d.processes.push_back(process(4242, 12 * gib + static_cast<uint64_t>(t % 8) * gib,
                                "python train.py --model llama"));
  d.processes.push_back(process(777, 3 * gib, "ollama serve", "bob"));
  s.allocators.push_back(agent(4242, d, 8 * gib + static_cast<uint64_t>(t % 8) * gib / 2,
                               10 * gib + static_cast<uint64_t>(t % 8) * gib));
  s.devices.push_back(std::move(d));
  return s;
}

/// What the Python fallback says when no torch-facing library fits and none can be compiled.
inline constexpr const char* polling_reason =
    "no C++ compiler (c++, g++ or clang++; or $CXX) to build the agent for torch 2.11.0+cu130, "
    "which this vramscope carries none for; install one (Debian/Ubuntu: apt install g++; "
    "Fedora/RHEL: dnf install gcc-c++)";

/// one_gpu() whose trainer polls (no allocator events): its peaks are sampled.
inline SystemSample one_gpu_polling(int t = 0) {
  SystemSample s = one_gpu(t);
  s.allocators[0].polling_only = true;
  s.allocators[0].polling_reason = polling_reason;
  return s;
}

/// 8 GPUs, 64 processes: 8 ranks of a torchrun job (one per GPU, with agents) and 7 more
/// processes per GPU without agents.
inline SystemSample eight_gpus() {
  SystemSample s;
  s.timestamp_ns = base_ns;
  s.hostname = "dgx-01";
  s.driver_version = "580.95.05";
  uint32_t pid = 10000;
  for (uint32_t g = 0; g < 8; ++g) {
    DeviceSample d = device(g, (40 + g) * gib);
    d.processes.push_back(process(pid, (30 + g) * gib, "python -m torch.distributed.run train.py"));
    s.allocators.push_back(agent(pid, d, (20 + g) * gib, (26 + g) * gib, static_cast<int32_t>(g)));
    ++pid;
    for (uint32_t k = 0; k < 7; ++k) {
      d.processes.push_back(
          process(pid++, (1 + k) * 256 * mib, "worker-" + std::to_string(k), "bob"));
    }
    s.devices.push_back(std::move(d));
  }
  return s;
}

}  // namespace vramscope::view::fixtures
