// src/core/plausible.cpp -- finding the byte count no GPU can hold in a sample (see plausible.hpp)
#include "vramscope/core/plausible.hpp"

#include <string_view>

namespace vramscope {
namespace {

/// "<who> <field> <value>" when `value` is implausible, else "".
std::string check(const std::string& who, std::string_view field, std::optional<uint64_t> value) {
  if (is_plausible_bytes(value)) return "";
  std::string out = who + " ";
  out += field;
  return out + " " + std::to_string(*value);
}

std::string device_fields(const DeviceSample& d) {
  const std::string who = "GPU " + std::to_string(d.index);
  for (const auto& [field, value] :
       {std::pair<std::string_view, std::optional<uint64_t>>{"total_bytes", d.total_bytes},
        {"reserved_bytes", d.reserved_bytes},
        {"used_bytes", d.used_bytes},
        {"free_bytes", d.free_bytes},
        {"bar1_total_bytes", d.bar1_total_bytes},
        {"bar1_used_bytes", d.bar1_used_bytes}}) {
    if (std::string why = check(who, field, value); !why.empty()) return why;
  }
  for (const MigInstanceSample& m : d.mig_instances) {
    for (const auto& [field, value] :
         {std::pair<std::string_view, std::optional<uint64_t>>{"MIG total_bytes", m.total_bytes},
          {"MIG used_bytes", m.used_bytes},
          {"MIG free_bytes", m.free_bytes}}) {
      if (std::string why = check(who, field, value); !why.empty()) return why;
    }
  }
  for (const ProcessSample& p : d.processes) {
    std::string why = check(who + " pid " + std::to_string(p.pid), "used_bytes", p.used_bytes);
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace

std::string implausible_bytes(const std::string& who, const DriverBreakdown& parts) {
  for (const BreakdownField& field : breakdown_fields) {
    if (!is_breakdown_bytes(field)) continue;
    const std::optional<uint64_t> bytes = breakdown_bytes(parts, field);
    if (!is_plausible_bytes(bytes)) return check(who + " driver parts", field.name, bytes);
  }
  return "";
}

std::string implausible_bytes(const SystemSample& sample) {
  for (const DeviceSample& d : sample.devices) {
    if (std::string why = device_fields(d); !why.empty()) return why;
  }
  for (const AllocatorSample& a : sample.allocators) {
    const std::string who = "agent of pid " + std::to_string(a.pid);
    for (const AllocatorCounter& counter : allocator_counters) {
      if (counter.unit != CounterUnit::Bytes) continue;
      if (std::string why = check(who, counter.name, a.*counter.member); !why.empty()) return why;
    }
    if (!a.breakdown) continue;
    if (std::string why = implausible_bytes(who, *a.breakdown); !why.empty()) return why;
  }
  for (const StepRecord& s : sample.steps) {
    const std::string who = "step " + std::to_string(s.step) + " of pid " + std::to_string(s.pid);
    for (const auto& field : step_byte_fields) {
      if (std::string why = check(who, field.name, s.*field.member); !why.empty()) return why;
    }
    if (!s.category_bytes) continue;
    for (std::size_t i = 0; i < s.category_bytes->size(); ++i) {
      std::string why = check(who, memory_category_names[i], (*s.category_bytes)[i]);
      if (!why.empty()) return why;
    }
  }
  return "";
}

}  // namespace vramscope
