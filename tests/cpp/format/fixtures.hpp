// tests/cpp/format/fixtures.hpp -- sample builders and a field-by-field dump for format tests
//
// Tests compare samples with their defaulted operator==; dump() prints every field of a
// SystemSample (gtest prints it through PrintTo), so a failing comparison shows which differs.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "vramscope/format/recording.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::testing {

template <typename T>
std::string opt_text(const std::optional<T>& value) {
  if (!value) return "-";
  std::ostringstream out;
  out << +*value;
  return out.str();
}

/// Every field of a sample, one line per object: what a failed comparison prints.
inline std::string dump(const SystemSample& s) {
  std::ostringstream out;
  out << "sample ts=" << s.timestamp_ns << " host=" << s.hostname << " driver=" << s.driver_version
      << "\n";
  for (const auto& d : s.devices) {
    out << " device " << d.index << " name=" << d.name << " uuid=" << d.uuid
        << " pci=" << d.pci_bus_id << " total=" << opt_text(d.total_bytes)
        << " reserved=" << opt_text(d.reserved_bytes) << " used=" << opt_text(d.used_bytes)
        << " free=" << opt_text(d.free_bytes) << " v2=" << d.memory_v2
        << " bar1_total=" << opt_text(d.bar1_total_bytes)
        << " bar1_used=" << opt_text(d.bar1_used_bytes) << " mig=" << opt_text(d.mig_enabled)
        << " procs_supported=" << d.processes_supported << " lost=" << d.lost
        << " error=" << d.error << "\n";
    for (const auto& m : d.mig_instances) {
      out << "  mig " << m.index << " uuid=" << m.uuid << " gi=" << opt_text(m.gpu_instance_id)
          << " ci=" << opt_text(m.compute_instance_id) << " total=" << opt_text(m.total_bytes)
          << " used=" << opt_text(m.used_bytes) << " free=" << opt_text(m.free_bytes) << "\n";
    }
    for (const auto& p : d.processes) {
      out << "  proc " << p.pid << " used=" << opt_text(p.used_bytes)
          << " gi=" << opt_text(p.gpu_instance_id) << " ci=" << opt_text(p.compute_instance_id)
          << " kinds=" << +p.kinds << " visible=" << p.visible << " user=" << p.user
          << " cmd=" << p.command << "\n";
    }
  }
  for (const auto& a : s.allocators) {
    out << " alloc pid=" << a.pid << " rank=" << a.rank << "/" << a.world_size
        << " dev=" << a.cuda_device << " uuid=" << a.device_uuid << " a=" << a.allocated_bytes
        << " r=" << a.reserved_bytes << " q=" << a.requested_bytes << " act=" << a.active_bytes
        << " split=" << a.inactive_split_bytes << " pa=" << a.peak_allocated_bytes
        << " pr=" << a.peak_reserved_bytes << " step=" << a.step
        << " spa=" << a.step_peak_allocated_bytes << " spr=" << a.step_peak_reserved_bytes
        << " ooms=" << a.oom_count << " events=" << a.event_count
        << " dropped=" << a.dropped_event_count << " polling=" << a.polling_only
        << " reason=" << a.polling_reason << " updated=" << a.updated_ns << "\n";
    if (const auto& b = a.breakdown) {
      out << "  parts";
      for (const BreakdownField& field : breakdown_fields) {
        out << " " << field.name << "=";
        std::visit([&](auto member) { out << opt_text(std::optional((*b).*member)); },
                   field.member);
      }
      out << "\n";
    }
  }
  for (const auto& r : s.steps) {
    out << " step pid=" << r.pid << " rank=" << r.rank << " dev=" << r.cuda_device
        << " uuid=" << r.device_uuid << " step=" << r.step << " end=" << r.end_ns
        << " dur=" << r.duration_ns << " pa=" << r.peak_allocated_bytes
        << " pr=" << r.peak_reserved_bytes << " pq=" << r.peak_requested_bytes
        << " a=" << r.allocated_bytes << " r=" << r.reserved_bytes << " categories=";
    if (r.category_bytes) {
      for (uint64_t value : *r.category_bytes) out << value << ",";
    } else {
      out << "-";
    }
    out << "\n";
  }
  for (const auto& r : s.ooms) {
    out << " oom pid=" << r.pid << " rank=" << r.rank << " dev=" << r.cuda_device
        << " uuid=" << r.device_uuid << " ts=" << r.timestamp_ns << " req=" << r.requested_bytes
        << " total=" << r.device_total_bytes << " free=" << r.device_free_bytes
        << " a=" << r.allocated_bytes << " r=" << r.reserved_bytes << "\n";
  }
  return out.str();
}

/// A breakdown whose every field holds a value of its own, above 2^32 where its bytes are
/// (every byte of it matters), each optional part present unless it is named `absent`. The
/// driver's reading holds exactly the parts it is split into (reserved + non-PyTorch), so the
/// breakdown is plausible on any device of 80 GiB.
inline DriverBreakdown distinct_breakdown(std::string_view absent = {}) {
  DriverBreakdown b;
  uint64_t value = 0;
  for (const BreakdownField& field : breakdown_fields) {
    ++value;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(b.*member)>;
          if constexpr (std::is_same_v<T, uint32_t>) {
            b.*member = static_cast<uint32_t>(20'000 + value);
          } else if constexpr (std::is_same_v<T, std::optional<uint64_t>>) {
            if (field.name != absent) b.*member = (value << 31U) + value;
          } else {
            b.*member = static_cast<T>((value << 31U) + value);
          }
        },
        field.member);
  }
  b.driver_bytes = b.reserved_bytes + b.non_pytorch_bytes();
  return b;
}

/// A deterministic sample with `gpus` devices of `processes` processes each; `seed` varies the
/// values and which optional fields are present, so consecutive seeds cover both cases.
inline SystemSample make_sample(uint64_t seed, int gpus = 1, int processes = 8) {
  SystemSample s;
  s.timestamp_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(seed) * 100'000'000;
  s.hostname = "node-07";
  s.driver_version = "570.86.15";
  for (int g = 0; g < gpus; ++g) {
    DeviceSample d;
    d.index = static_cast<uint32_t>(g);
    d.name = "NVIDIA H100 80GB HBM3";
    d.uuid = "GPU-" + std::to_string(1000 + g) + "a1b2c3-d4e5-f6a7-b8c9-d0e1f2a3b4c5";
    d.pci_bus_id = "00000000:" + std::to_string(10 + g) + ":00.0";
    const bool rich = ((seed + g) % 3) != 2;
    d.total_bytes = 85'520'809'984ULL;
    if (rich) d.reserved_bytes = 548'405'248ULL;
    d.used_bytes = 1'000'000'000ULL * ((seed % 70) + 1) + g;
    if (rich) d.free_bytes = *d.total_bytes - *d.used_bytes;
    d.memory_v2 = rich;
    if (seed % 2 == 0) d.bar1_total_bytes = 1ULL << 37U;
    if (seed % 2 == 0) d.bar1_used_bytes = 50ULL << 20U;
    if (seed % 4 != 3) d.mig_enabled = (g == 1);
    if (g == 1) {
      for (uint32_t m = 0; m < 3; ++m) {
        MigInstanceSample mig;
        mig.index = m;
        mig.uuid = "MIG-" + std::to_string(m) + "-c0ffee";
        mig.gpu_instance_id = m + 1;
        if (m != 1) mig.compute_instance_id = 0;
        mig.total_bytes = 10ULL << 30U;
        if (m != 2) mig.used_bytes = (m + 1) * (1ULL << 29U);
        if (m != 2) mig.free_bytes = *mig.total_bytes - *mig.used_bytes;
        d.mig_instances.push_back(mig);
      }
    }
    d.processes_supported = rich || seed % 5 == 0;
    for (int p = 0; p < processes; ++p) {
      ProcessSample proc;
      proc.pid = static_cast<uint32_t>(4000 + 10 * g + p);
      if ((p + seed) % 4 != 0) proc.used_bytes = (static_cast<uint64_t>(p) + 1) << 28U;
      if (g == 1) proc.gpu_instance_id = static_cast<uint32_t>(p % 3 + 1);
      if (g == 1 && p % 2 == 0) proc.compute_instance_id = 0;
      proc.kinds = static_cast<uint8_t>(p % 3 == 0 ? ProcessKindCompute
                                                   : ProcessKindCompute | ProcessKindGraphics);
      proc.visible = p % 5 != 4;
      if (proc.visible) {
        proc.user = p % 2 == 0 ? "alice" : "1001";
        proc.command =
            "python train.py --model=llama-3-8b --rank=" + std::to_string(p) + " --tag=训练-😀";
      }
      d.processes.push_back(proc);
    }
    if (seed % 7 == 3) d.error = "process list: insufficient permissions";
    d.lost = seed % 11 == 10 && g == 0;
    s.devices.push_back(d);
  }
  for (int a = 0; a < gpus; ++a) {
    AllocatorSample alloc;
    alloc.pid = static_cast<uint32_t>(4000 + 10 * a);
    alloc.rank = gpus > 1 ? a : -1;
    alloc.world_size = gpus > 1 ? gpus : -1;
    alloc.cuda_device = a;
    alloc.device_uuid = s.devices[static_cast<std::size_t>(a)].uuid;
    alloc.allocated_bytes = (seed + 1) * 123'456'789ULL;
    alloc.reserved_bytes = alloc.allocated_bytes + (64ULL << 20U);
    alloc.requested_bytes = alloc.allocated_bytes - 1024;
    alloc.active_bytes = alloc.allocated_bytes + 512;
    alloc.inactive_split_bytes = 3 * 1024 * 1024;
    alloc.peak_allocated_bytes = alloc.allocated_bytes * 2;
    alloc.peak_reserved_bytes = alloc.reserved_bytes * 2;
    alloc.step = seed / 3;
    alloc.step_peak_allocated_bytes = 77'000'000'000ULL;
    alloc.step_peak_reserved_bytes = 78'000'000'000ULL;
    alloc.oom_count = seed % 4 == 0 ? 1 : 0;
    alloc.event_count = seed * 1000 + 17;
    alloc.dropped_event_count = seed % 9;
    alloc.polling_only = a % 2 == 1;
    // Most polling agents say why (format 5); one seed in four is an older agent that does not.
    if (alloc.polling_only && seed % 4 != 3) {
      alloc.polling_reason = "polls: reason " + std::to_string(seed % 3) + " \xE2\x80\x94 fix";
    }
    alloc.updated_ns = s.timestamp_ns - 3'000'000;
    // Two seeds in three: the agent's settled driver breakdown, its optional parts varying.
    if ((seed + a) % 3 != 1) {
      DriverBreakdown b;
      b.paired_ns = s.timestamp_ns - 120'000'000 - static_cast<int64_t>(seed);
      b.reserved_bytes = alloc.reserved_bytes - (seed % 2 == 0 ? 0 : 2ULL << 21U);
      b.context_bytes = 536'870'912ULL + seed;
      if (seed % 2 == 0) b.private_pool_bytes = 34ULL << 20U;
      if (seed % 4 < 2) b.other_bytes = 64ULL << 20U;
      if (seed % 5 == 1) b.nccl_bytes = 312ULL << 20U;
      if (seed % 3 == 0) b.first_context_bytes = 536'870'912ULL;
      b.driver_bytes = b.reserved_bytes + b.non_pytorch_bytes();
      b.excess_bytes = seed % 7 == 6 ? 4096 : 0;
      b.nccl_version = seed % 5 == 1 ? 22'907U : (seed % 5 == 2 ? 22'809U : 0U);
      b.unsettled_count = static_cast<uint32_t>(seed % 13);
      alloc.breakdown = b;
    }
    s.allocators.push_back(alloc);
  }
  if (seed % 3 == 0) {
    StepRecord step;
    step.pid = 4000;
    step.rank = 0;
    step.cuda_device = 0;
    step.device_uuid = s.devices[0].uuid;
    step.step = seed / 3;
    step.end_ns = s.timestamp_ns - 20'000'000;
    step.duration_ns = 1'250'000'000;
    step.peak_allocated_bytes = 70'000'000'000ULL;
    step.peak_reserved_bytes = 72'000'000'000ULL;
    step.peak_requested_bytes = 69'999'000'000ULL;
    step.allocated_bytes = 30'000'000'000ULL;
    step.reserved_bytes = 72'000'000'000ULL;
    // Every other seed: a process that tracks categories (the second step never does).
    if (seed % 2 == 0) {
      step.category_bytes =
          CategoryBytes{20'000'000'000ULL + seed, 20'000'000'000ULL, 27'000'000'000ULL,
                        2'500'000'000ULL,         499'000'000ULL,    0};
    }
    s.steps.push_back(step);
    step.step += 1000;
    step.rank = -1;
    step.category_bytes.reset();
    s.steps.push_back(step);
  }
  if (seed % 5 == 4) {
    OomRecord oom;
    oom.pid = 4000;
    oom.rank = 0;
    oom.cuda_device = 0;
    oom.device_uuid = s.devices[0].uuid;
    oom.timestamp_ns = s.timestamp_ns - 1;
    oom.requested_bytes = 2ULL << 30U;
    oom.device_total_bytes = 85'520'809'984ULL;
    oom.device_free_bytes = 1ULL << 30U;
    oom.allocated_bytes = 80'000'000'000ULL;
    oom.reserved_bytes = 83'000'000'000ULL;
    s.ooms.push_back(oom);
  }
  return s;
}

/// Metadata with every field set.
inline RecordingMetadata make_metadata() {
  RecordingMetadata m;
  m.created_ns = 1'700'000'000'000'000'000;
  m.interval_ns = 100'000'000;
  m.hostname = "node-07";
  m.driver_version = "570.86.15";
  m.command = "torchrun --nproc-per-node=8 train.py --lr 3e-4";
  m.writer_version = "0.1.0";
  return m;
}

}  // namespace vramscope::testing

namespace vramscope {

/// gtest prints a sample through dump() (found by argument-dependent lookup).
inline void PrintTo(const SystemSample& sample, std::ostream* out) {
  *out << "\n" << testing::dump(sample);
}

}  // namespace vramscope
