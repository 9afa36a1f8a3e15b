// src/report/summary_plausible.cpp -- finding an impossible peak in a summary (see the header)
#include "vramscope/report/summary_plausible.hpp"

#include <array>
#include <optional>
#include <string_view>
#include <utility>

#include "vramscope/core/plausible.hpp"

namespace vramscope::report {
namespace {

using Field = std::pair<std::string_view, std::optional<uint64_t>>;

/// "<who> <field> <value>" for the first implausible field, else "".
template <std::size_t N>
std::string first_implausible(const std::string& who, const std::array<Field, N>& fields) {
  for (const auto& [name, value] : fields) {
    if (is_plausible_bytes(value)) continue;
    std::string out = who + " ";
    out += name;
    return out + " " + std::to_string(*value);
  }
  return "";
}

}  // namespace

std::string implausible_bytes(const RecordingSummary& summary) {
  for (const auto& [uuid, d] : summary.devices()) {
    std::string why =
        first_implausible("GPU " + std::to_string(d.index),
                          std::array<Field, 2>{{{"total_bytes", d.total_bytes},
                                                {"peak_used_bytes", d.peak_used_bytes}}});
    if (!why.empty()) return why;
  }
  for (const auto& [key, p] : summary.processes()) {
    const std::array<Field, 5> fields{{
        {"peak_used_bytes", p.peak_used_bytes},
        {"torch_peak_allocated_bytes", p.torch_peak_allocated_bytes},
        {"torch_peak_reserved_bytes", p.torch_peak_reserved_bytes},
        {"max_step_peak_allocated_bytes", p.max_step_peak_allocated_bytes},
        {"category_step_peak_requested_bytes", p.category_step_peak_requested_bytes},
    }};
    const std::string who = "pid " + std::to_string(p.pid);
    if (std::string why = first_implausible(who, fields); !why.empty()) return why;
    if (p.parts_at_peak) {
      // Against the total of the device the digest names for this process, as a sample would be.
      const auto device = summary.devices().find(p.device_uuid);
      const std::optional<uint64_t> total =
          device != summary.devices().end() ? device->second.total_bytes : std::nullopt;
      std::string why = vramscope::implausible_bytes(who, *p.parts_at_peak, total);
      if (!why.empty()) return why;
    }
    if (!p.category_step_bytes) continue;
    for (const uint64_t bytes : *p.category_step_bytes) {
      if (!is_plausible_bytes(bytes)) return who + " category bytes " + std::to_string(bytes);
    }
  }
  return "";
}

}  // namespace vramscope::report
