// agent/py_records.cpp -- the agent's records as Python dicts and lists (see py_records.hpp)
#include "py_records.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>
#include <variant>

namespace nb = nanobind;

namespace vramscope::agent {

nb::dict stats_dict(const tracking::DeviceStatsView& v) {
  nb::dict d;
  for (const tracking::DeviceStatsField& field : tracking::device_stats_fields) {
    const uint64_t value = field.read(v);
    if (field.is_flag) {
      d[std::string(field.name).c_str()] = value != 0;
    } else {
      d[std::string(field.name).c_str()] = value;
    }
  }
  return d;
}

nb::dict step_dict(const StepRecord& r) {
  nb::dict d;
  d["device"] = r.cuda_device;
  d["step"] = r.step;
  for (const auto& field : step_byte_fields) d[std::string(field.name).c_str()] = r.*field.member;
  d["duration_ns"] = r.duration_ns;
  d["end_ns"] = r.end_ns;
  if (r.category_bytes) {
    nb::dict categories;
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      categories[std::string(memory_category_names[c]).c_str()] = (*r.category_bytes)[c];
    }
    d["categories"] = categories;
  } else {
    d["categories"] = nb::none();
  }
  return d;
}

nb::dict oom_dict(const OomRecord& r) {
  nb::dict d;
  d["device"] = r.cuda_device;
  d["device_uuid"] = r.device_uuid;
  d["timestamp_ns"] = r.timestamp_ns;
  for (const auto& field : oom_byte_fields) d[std::string(field.name).c_str()] = r.*field.member;
  return d;
}

nb::list events_list(const std::vector<tracking::Event>& events) {
  nb::list out;
  for (const tracking::Event& e : events) {
    nb::dict d;
    d["action"] = std::string(tracking::action_name(e.action));
    d["raw_action"] = e.raw_action;
    d["size_bytes"] = e.size_bytes;
    d["address"] = e.address;
    d["monotonic_ns"] = e.timestamp_ns;
    out.append(d);
  }
  return out;
}

nb::list segments_list(const std::vector<attribution::SegmentView>& segments) {
  nb::list out;
  for (const attribution::SegmentView& s : segments) {
    nb::list blocks;
    for (const attribution::BlockView& b : s.blocks) {
      blocks.append(nb::make_tuple(b.size_bytes, b.requested_bytes,
                                   std::string(attribution::block_state_name(b.state))));
    }
    nb::dict d;
    d["device"] = s.device;
    d["address"] = s.address;
    d["total_size"] = s.total_bytes;
    d["requested_size"] = s.requested_bytes;
    d["allocated_size"] = s.allocated_bytes;
    d["active_size"] = s.active_bytes;
    d["stream"] = s.stream;
    d["is_large"] = s.is_large;
    d["is_expandable"] = s.is_expandable;
    d["blocks"] = blocks;
    out.append(d);
  }
  return out;
}

nb::list op_rows_list(const std::vector<attribution::OpTotals>& rows,
                      const attribution::OpRegistry& registry, const std::vector<uint64_t>& calls) {
  nb::list out;
  for (const attribution::OpTotals& r : rows) {
    nb::dict d;
    d["name"] = registry.name(r.op_id);
    d["calls"] = r.op_id < calls.size() ? calls[r.op_id] : 0;
    d["alloc_count"] = r.alloc_count;
    d["allocated_bytes"] = r.allocated_bytes;
    d["self_freed_bytes"] = r.self_freed_bytes;
    d["live_bytes"] = r.live_bytes;
    d["live_at_peak_bytes"] = r.live_at_peak_bytes;
    out.append(d);
  }
  return out;
}

nb::object breakdown_object(const std::optional<DriverBreakdown>& breakdown) {
  if (!breakdown) return nb::none();
  nb::dict out;
  for (const BreakdownField& field : breakdown_fields) {
    std::visit([&](auto member) { out[field.name.data()] = (*breakdown).*member; }, field.member);
  }
  out["non_pytorch_bytes"] = breakdown->non_pytorch_bytes();
  return out;
}

nb::dict categories_dict(
    const std::array<attribution::CategoryTotals, attribution::category_count>& totals) {
  nb::dict d;
  for (const attribution::CategoryTotals& c : totals) {
    d[std::string(attribution::category_name(c.category)).c_str()] =
        nb::make_tuple(c.live_bytes, c.live_at_peak_bytes);
  }
  return d;
}

}  // namespace vramscope::agent
