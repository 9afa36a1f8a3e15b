// src/report/json_report.cpp -- SystemSample -> JSON (schema in docs/json-schema.md)
#include "vramscope/report/json_report.hpp"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "vramscope/core/utf8.hpp"
#include "vramscope/join.hpp"
#include "vramscope/report/process_type.hpp"

namespace vramscope::report {
namespace {

// ordered_json keeps keys in the documented order (the default json sorts them).
using json = nlohmann::ordered_json;

/// An optional becomes its value or null: unsupported is never written as 0.
template <typename T>
json or_null(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

/// A plain value as itself, an optional one as or_null() writes it.
template <typename T>
json or_null_value(const T& value) {
  return json(value);
}
template <typename T>
json or_null_value(const std::optional<T>& value) {
  return or_null(value);
}

/// Empty text is "unknown" here, so null rather than "".
json string_or_null(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

json mig_json(const MigInstanceSample& mig) {
  return json{{"index", mig.index},
              {"uuid", mig.uuid},
              {"gpu_instance_id", or_null(mig.gpu_instance_id)},
              {"compute_instance_id", or_null(mig.compute_instance_id)},
              {"total_bytes", or_null(mig.total_bytes)},
              {"used_bytes", or_null(mig.used_bytes)},
              {"free_bytes", or_null(mig.free_bytes)}};
}

}  // namespace

nlohmann::ordered_json driver_parts_json(const std::optional<DriverBreakdown>& parts) {
  if (!parts) return nullptr;
  const DriverBreakdown& b = *parts;
  json out = json::object();
  for (const BreakdownField& field : breakdown_fields) {
    // The sum of the non-PyTorch parts sits before the excess, as docs/json-schema.md lists it.
    if (field.member == BreakdownField::Member(&DriverBreakdown::excess_bytes)) {
      out["non_pytorch_bytes"] = b.non_pytorch_bytes();
    }
    if (field.member == BreakdownField::Member(&DriverBreakdown::nccl_version)) {
      // The version as text ("2.28.9"), null without a communicator, then what it says of NCCL.
      out[std::string(field.name)] =
          b.nccl_version != 0 ? json(nccl_version_text(b.nccl_version)) : json();
      out["nccl"] = nccl_status_text(b);
      continue;
    }
    std::visit([&](auto member) { out[std::string(field.name)] = or_null_value(b.*member); },
               field.member);
  }
  return out;
}

namespace {

/// The agent's numbers attached to a process row, plus the decomposition of driver used.
json torch_json(const JoinedProcess& row) {
  if (!row.torch) return nullptr;
  const AllocatorSample& t = *row.torch;
  json issues = json::array();
  for (uint8_t bit = 1; bit != 0; bit = static_cast<uint8_t>(bit << 1U)) {
    if ((row.issues & bit) != 0) issues.push_back(describe_join_issues(bit));
  }
  return json{{"allocated_bytes", t.allocated_bytes},
              {"reserved_bytes", t.reserved_bytes},
              {"cached_free_bytes", or_null(row.cached_free_bytes)},
              {"non_pytorch_bytes", or_null(row.non_pytorch_bytes)},
              {"rank", t.rank},
              {"cuda_device", t.cuda_device},
              {"step", t.step},
              {"issues", issues},
              {"driver_parts", driver_parts_json(t.breakdown)}};
}

json process_json(const JoinedProcess& row) {
  if (!row.driver) {
    // Agent-only row: the driver did not list this pid on this device.
    return json{
        {"pid", row.pid},          {"used_bytes", nullptr},      {"type", nullptr},
        {"user", nullptr},         {"command", nullptr},         {"visible", false},
        {"in_driver_list", false}, {"gpu_instance_id", nullptr}, {"compute_instance_id", nullptr},
        {"torch", torch_json(row)}};
  }
  const ProcessSample& p = *row.driver;
  return json{{"pid", p.pid},
              {"used_bytes", or_null(p.used_bytes)},
              {"type", process_type_text(p.kinds)},
              {"user", p.visible ? string_or_null(p.user) : json(nullptr)},
              {"command", p.visible ? string_or_null(p.command) : json(nullptr)},
              {"visible", p.visible},
              {"in_driver_list", true},
              {"gpu_instance_id", or_null(p.gpu_instance_id)},
              {"compute_instance_id", or_null(p.compute_instance_id)},
              {"torch", torch_json(row)}};
}

/// A device's object without its processes (the last key, which device_json() adds).
json device_head_json(const DeviceSample& d) {
  json mig = json::array();
  for (const MigInstanceSample& m : d.mig_instances) mig.push_back(mig_json(m));
  return json{{"index", d.index},
              {"name", string_or_null(d.name)},
              {"uuid", string_or_null(d.uuid)},
              {"pci_bus_id", string_or_null(d.pci_bus_id)},
              {"total_bytes", or_null(d.total_bytes)},
              {"reserved_bytes", or_null(d.reserved_bytes)},
              {"used_bytes", or_null(d.used_bytes)},
              {"free_bytes", or_null(d.free_bytes)},
              {"memory_info_version", d.memory_v2 ? 2 : 1},
              {"bar1_total_bytes", or_null(d.bar1_total_bytes)},
              {"bar1_used_bytes", or_null(d.bar1_used_bytes)},
              {"mig_enabled", or_null(d.mig_enabled)},
              {"mig_instances", mig},
              {"lost", d.lost},
              {"error", string_or_null(d.error)},
              {"processes_supported", d.processes_supported}};
}

json device_json(const DeviceSample& d, const JoinedDevice& joined) {
  json out = device_head_json(d);
  json processes = json::array();
  for (const JoinedProcess& row : joined.processes) processes.push_back(process_json(row));
  out["processes"] = std::move(processes);
  return out;
}

json allocator_json(const AllocatorSample& a, bool joined) {
  json out{{"pid", a.pid},
           {"rank", a.rank},
           {"world_size", a.world_size},
           {"cuda_device", a.cuda_device},
           {"device_uuid", a.device_uuid},
           {"joined_device", joined}};
  for (const AllocatorCounter& counter : allocator_counters) {
    out[std::string(counter.name)] = a.*counter.member;
  }
  out["polling_only"] = a.polling_only;
  // Null when the process does not poll or did not say why (an older vramscope).
  out["polling_reason"] = a.polling_reason.empty() ? json(nullptr) : json(a.polling_reason);
  out["updated_ns"] = a.updated_ns;
  out["driver_parts"] = driver_parts_json(a.breakdown);
  return out;
}

/// `exact`: were its peaks seen at every event (false: its agent polls, PolledSteps)?
json step_json(const StepRecord& s, bool exact) {
  // Null, never zeros, when the process did not track categories.
  json categories = nullptr;
  if (s.category_bytes) {
    categories = json::object();
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      categories[std::string(memory_category_names[c])] = (*s.category_bytes)[c];
    }
  }
  json out{{"pid", s.pid},
           {"rank", s.rank},
           {"cuda_device", s.cuda_device},
           {"device_uuid", s.device_uuid},
           {"step", s.step},
           {"end_ns", s.end_ns},
           {"duration_ns", s.duration_ns}};
  for (const auto& field : step_byte_fields) out[std::string(field.name)] = s.*field.member;
  out["peaks_exact"] = exact;
  out["category_bytes"] = categories;
  return out;
}

json oom_json(const OomRecord& o) {
  json out{{"pid", o.pid},
           {"rank", o.rank},
           {"cuda_device", o.cuda_device},
           {"device_uuid", o.device_uuid},
           {"timestamp_ns", o.timestamp_ns}};
  for (const auto& field : oom_byte_fields) out[std::string(field.name)] = o.*field.member;
  return out;
}

}  // namespace

namespace {

/// Which allocators of `sample` joined a device: false for those the join left unmatched.
/// Through a set, so that a sample of 65,536 agents on no GPU is not 2^32 comparisons.
std::vector<bool> joined_allocators(const SystemSample& sample, const JoinResult& joined) {
  using Key = std::tuple<uint32_t, int32_t, std::string_view>;
  std::set<Key> unmatched;
  for (const AllocatorSample& u : joined.unmatched_allocators) {
    unmatched.emplace(u.pid, u.cuda_device, u.device_uuid);
  }
  std::vector<bool> out;
  out.reserve(sample.allocators.size());
  for (const AllocatorSample& a : sample.allocators) {
    out.push_back(unmatched.empty() ||
                  !unmatched.contains(Key(a.pid, a.cuda_device, a.device_uuid)));
  }
  return out;
}

/// The document's keys before its lists, in their order.
json head_json(const SystemSample& sample) {
  json doc;
  doc["schema_version"] = json_schema_version;
  doc["timestamp_ns"] = sample.timestamp_ns;
  doc["hostname"] = sample.hostname;
  doc["driver_version"] = string_or_null(sample.driver_version);
  return doc;
}

/// Gathers the pieces of a line and hands them on in blocks of about 64 KiB.
class Pieces {
 public:
  explicit Pieces(const std::function<void(std::string_view)>& write) : m_write(write) {}
  Pieces(const Pieces&) = delete;
  Pieces& operator=(const Pieces&) = delete;
  ~Pieces() = default;

  void add(std::string_view text) {
    m_pending += text;
    if (m_pending.size() >= block_bytes) done();
  }
  /// An object's compact text without its closing brace, so that more keys can follow.
  void open_object(const json& value) {
    const std::string text = json_text(value);
    add(std::string_view(text).substr(0, text.size() - 1));
  }
  /// Hands on what is gathered.
  void done() {
    if (!m_pending.empty()) m_write(m_pending);
    m_pending.clear();
  }

 private:
  static constexpr std::size_t block_bytes = 64U << 10U;
  const std::function<void(std::string_view)>& m_write;
  std::string m_pending;
};

}  // namespace

void write_sample_json(const SystemSample& sample,
                       const std::function<void(std::string_view)>& write) {
  const JoinResult joined = join_processes(sample);
  Pieces out(write);
  // The same text as the document format_sample_json(sample, true) builds, dumped compactly:
  // each row is a document of its own, written as it is made.
  out.open_object(head_json(sample));
  out.add(",\"devices\":[");
  for (std::size_t i = 0; i < joined.devices.size(); ++i) {
    const JoinedDevice& jd = joined.devices[i];
    if (i > 0) out.add(",");
    out.open_object(device_head_json(sample.devices[jd.device_position]));
    out.add(",\"processes\":[");
    for (std::size_t k = 0; k < jd.processes.size(); ++k) {
      if (k > 0) out.add(",");
      out.add(json_text(process_json(jd.processes[k])));
    }
    out.add("]}");
  }
  out.add("],\"allocators\":[");
  const std::vector<bool> joined_device = joined_allocators(sample, joined);
  for (std::size_t i = 0; i < sample.allocators.size(); ++i) {
    if (i > 0) out.add(",");
    out.add(json_text(allocator_json(sample.allocators[i], joined_device[i])));
  }
  out.add("],\"steps\":[");
  const PolledSteps polled(sample);
  for (std::size_t i = 0; i < sample.steps.size(); ++i) {
    if (i > 0) out.add(",");
    out.add(json_text(step_json(sample.steps[i], !polled.sampled(sample.steps[i]))));
  }
  out.add("],\"ooms\":[");
  for (std::size_t i = 0; i < sample.ooms.size(); ++i) {
    if (i > 0) out.add(",");
    out.add(json_text(oom_json(sample.ooms[i])));
  }
  out.add("]}");
  out.done();
}

std::string format_sample_json(const SystemSample& sample, bool pretty) {
  if (!pretty) {
    std::string line;
    write_sample_json(sample, [&line](std::string_view piece) { line += piece; });
    return line;
  }
  const JoinResult joined = join_processes(sample);
  json devices = json::array();
  for (const JoinedDevice& jd : joined.devices) {
    devices.push_back(device_json(sample.devices[jd.device_position], jd));
  }
  json allocators = json::array();
  const std::vector<bool> joined_device = joined_allocators(sample, joined);
  for (std::size_t i = 0; i < sample.allocators.size(); ++i) {
    allocators.push_back(allocator_json(sample.allocators[i], joined_device[i]));
  }
  json steps = json::array();
  const PolledSteps polled(sample);
  for (const StepRecord& s : sample.steps) steps.push_back(step_json(s, !polled.sampled(s)));
  json ooms = json::array();
  for (const OomRecord& o : sample.ooms) ooms.push_back(oom_json(o));

  json doc = head_json(sample);
  doc["devices"] = devices;
  doc["allocators"] = allocators;
  doc["steps"] = steps;
  doc["ooms"] = ooms;
  // Commands and user names come from other processes: bad UTF-8 becomes U+FFFD instead of an
  // exception that would lose the whole document.
  return json_text(doc, 2);
}

}  // namespace vramscope::report
