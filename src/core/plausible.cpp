// src/core/plausible.cpp -- finding the byte count no GPU can hold in a sample (see plausible.hpp)
#include "vramscope/core/plausible.hpp"

#include <string_view>

namespace vramscope {
namespace {

/// "<who> <field> <value>": the message for an implausible value (kept out of line).
template <typename Who>
[[gnu::noinline]] std::string implausible_text(const Who& who, std::string_view field,
                                               uint64_t value) {
  std::string out = who() + " ";
  out += field;
  return out + " " + std::to_string(value);
}

/// "<who> <field> <value>" when `value` is implausible, else "". `who()` names the record and
/// is called only then: a reader checks every sample, and naming each of its records (a
/// number turned into text, a string made) cost more than decoding it.
template <typename Who>
std::string check(const Who& who, std::string_view field, std::optional<uint64_t> value) {
  if (is_plausible_bytes(value)) return {};
  return implausible_text(who, field, *value);
}

std::string device_fields(const DeviceSample& d) {
  const auto who = [&d] { return "GPU " + std::to_string(d.index); };
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
    const auto process = [&] { return who() + " pid " + std::to_string(p.pid); };
    std::string why = check(process, "used_bytes", p.used_bytes);
    if (!why.empty()) return why;
  }
  return "";
}

/// The total of the device (or MIG instance) `uuid` names in `sample`, when the sample has it.
/// Linear in the devices: a sample holds at most 1,024, and only agents with a breakdown ask.
std::optional<uint64_t> total_of_device(const SystemSample& sample, const std::string& uuid) {
  if (uuid.empty()) return std::nullopt;
  for (const DeviceSample& d : sample.devices) {
    if (d.uuid == uuid) return d.total_bytes;
    for (const MigInstanceSample& m : d.mig_instances) {
      if (m.uuid == uuid) return m.total_bytes;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string implausible_bytes(const std::string& who, const DriverBreakdown& parts,
                              std::optional<uint64_t> device_total_bytes) {
  for (const BreakdownField& field : breakdown_fields) {
    if (!is_breakdown_bytes(field)) continue;
    const std::optional<uint64_t> bytes = breakdown_bytes(parts, field);
    if (!is_plausible_bytes(bytes)) {
      return check([&who] { return who + " driver parts"; }, field.name, bytes);
    }
  }
  // Every part is at most 2^50 from here, so no sum below wraps. The message is made only for
  // a breakdown refused: this runs for every agent of every sample read.
  const auto above = [&](std::string_view what, uint64_t sum, std::string_view bound,
                         uint64_t limit) {
    std::string out = who + " driver parts ";
    out += what;
    out += " " + std::to_string(sum) + " above ";
    out += bound;
    return out + " " + std::to_string(limit);
  };
  // The agent takes the non-PyTorch parts out of the driver's reading, after torch's reserved;
  // what did not fit in it is named as the excess (DriverPairing::split()).
  const uint64_t non_pytorch = parts.non_pytorch_bytes();
  if (non_pytorch > parts.driver_bytes) {
    return above("non_pytorch_bytes", non_pytorch, "driver_bytes", parts.driver_bytes);
  }
  if (parts.reserved_bytes + non_pytorch > parts.driver_bytes + parts.excess_bytes) {
    return above("reserved_bytes + non_pytorch_bytes", parts.reserved_bytes + non_pytorch,
                 "driver_bytes + excess_bytes", parts.driver_bytes + parts.excess_bytes);
  }
  if (!device_total_bytes) return "";
  // Each part is bytes on that device, which holds no more than its total; the excess is not
  // (it is by how much the parts found exceeded the reading).
  for (const BreakdownField& field : breakdown_fields) {
    if (!is_breakdown_bytes(field) ||
        field.member == BreakdownField::Member(&DriverBreakdown::excess_bytes)) {
      continue;
    }
    const std::optional<uint64_t> bytes = breakdown_bytes(parts, field);
    if (bytes && *bytes > *device_total_bytes) {
      return above(field.name, *bytes, "the device's total_bytes", *device_total_bytes);
    }
  }
  return "";
}

std::string implausible_bytes(const SystemSample& sample) {
  for (const DeviceSample& d : sample.devices) {
    if (std::string why = device_fields(d); !why.empty()) return why;
  }
  for (const AllocatorSample& a : sample.allocators) {
    const auto who = [&a] { return "agent of pid " + std::to_string(a.pid); };
    for (const AllocatorCounter& counter : allocator_counters) {
      if (counter.unit != CounterUnit::Bytes) continue;
      if (std::string why = check(who, counter.name, a.*counter.member); !why.empty()) return why;
    }
    if (!a.breakdown) continue;
    const std::optional<uint64_t> total = total_of_device(sample, a.device_uuid);
    // Checked unnamed first, named only to say what is wrong.
    if (!implausible_bytes(std::string(), *a.breakdown, total).empty()) {
      return implausible_bytes(who(), *a.breakdown, total);
    }
  }
  for (const StepRecord& s : sample.steps) {
    const auto who = [&s] {
      return "step " + std::to_string(s.step) + " of pid " + std::to_string(s.pid);
    };
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
