// src/report/summary_digest.cpp -- RecordingSummary merged across segments, serialized as the
// digest of a recording's index chunks, parsed back within bounds, and `show`'s reading
//
// merge() must give what add()ing the later samples would: peaks are raised only when strictly
// higher (so the earliest time of a peak wins, as in add()), names and commands take the later
// non-empty value, and peak times are kept relative to the first sample of the whole.
#include <nlohmann/json.hpp>
#include <utility>
#include <variant>
#include <vector>

#include "vramscope/report/recording_summary.hpp"
#include "vramscope/report/summary_plausible.hpp"

namespace vramscope::report {
namespace {

using Json = nlohmann::json;

/// Raises `peak` to `value` when `value` is higher; returns whether it did.
bool raise(std::optional<uint64_t>& peak, const std::optional<uint64_t>& value) {
  if (!value || (peak && *peak >= *value)) return false;
  peak = value;
  return true;
}

template <typename T>
Json opt(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

/// Deepest nesting a digest may have: serialize() writes 4 levels (document, list, entry,
/// category bytes or driver parts).
constexpr std::size_t max_digest_depth = 8;

/// Builds the document like from_cbor(), but refuses nesting deeper than max_digest_depth before
/// going down a level: nlohmann's CBOR reader recurses once per level, so a few hundred bytes
/// nested 200,000 deep would overflow the stack (a crash, not an exception). Built here rather
/// than on nlohmann's internal DOM parser, whose template changed between releases.
class DepthLimitedSax : public nlohmann::json_sax<Json> {
 public:
  explicit DepthLimitedSax(Json& root) : m_root(root) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t& /*text*/) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  /// A digest holds no binary values.
  bool binary(binary_t& /*v*/) override { return false; }
  bool start_object(std::size_t /*size*/) override { return open(Json::object()); }
  bool key(string_t& name) override {
    m_member = &(*m_open.back())[name];
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t /*size*/) override { return open(Json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) override {
    return false;
  }

 private:
  /// Places `v` where the document expects the next value; returns where it went.
  Json* place(Json v) {
    if (m_open.empty()) {
      m_root = std::move(v);
      return &m_root;
    }
    Json& parent = *m_open.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    *m_member = std::move(v);
    return m_member;
  }
  bool value(Json v) {
    place(std::move(v));
    return true;
  }
  bool open(Json container) {
    if (m_open.size() >= max_digest_depth) return false;
    m_open.push_back(place(std::move(container)));
    return true;
  }
  bool close() {
    m_open.pop_back();
    return true;
  }

  Json& m_root;
  /// The arrays and objects being filled, outermost first (at most max_digest_depth).
  std::vector<Json*> m_open;
  /// The member of the innermost object that the last key named.
  Json* m_member = nullptr;
};

/// A plain value as itself, an optional one as opt() writes it.
template <typename T>
Json opt_value(const T& value) {
  return Json(value);
}
template <typename T>
Json opt_value(const std::optional<T>& value) {
  return opt(value);
}

/// A driver breakdown as one array (breakdown_fields in their order; null for an unmeasured
/// part), or null.
Json parts_array(const std::optional<DriverBreakdown>& parts) {
  if (!parts) return nullptr;
  Json out = Json::array();
  for (const BreakdownField& field : breakdown_fields) {
    std::visit([&](auto member) { out.push_back(opt_value((*parts).*member)); }, field.member);
  }
  return out;
}

/// Reads element `at` of an array: null for an empty optional.
template <typename T>
void get_opt(const Json& json, std::size_t at, std::optional<T>& out) {
  const Json& value = json.at(at);
  if (value.is_null()) {
    out.reset();
  } else {
    out = value.get<T>();
  }
}

/// Reads element `at` of an array into a plain value, or into an optional as get_opt() does.
template <typename T>
void get_value(const Json& json, std::size_t at, T& out) {
  out = json.at(at).get<T>();
}
template <typename T>
void get_value(const Json& json, std::size_t at, std::optional<T>& out) {
  get_opt(json, at, out);
}

/// The breakdown parts_array() wrote (throws Json::exception for anything else).
DriverBreakdown parts_from(const Json& json) {
  DriverBreakdown b;
  for (std::size_t i = 0; i < breakdown_fields.size(); ++i) {
    std::visit([&](auto member) { get_value(json, i, b.*member); }, breakdown_fields[i].member);
  }
  return b;
}

}  // namespace

void RecordingSummary::merge(const RecordingSummary& later) {
  if (later.m_sample_count == 0) return;
  if (m_sample_count == 0) {
    *this = later;
    return;
  }
  // Peak times of `later` are relative to its own first sample; make them relative to ours.
  const auto rebase = [&](int64_t offset_ns) {
    return static_cast<int64_t>(static_cast<uint64_t>(later.m_start_ns) +
                                static_cast<uint64_t>(offset_ns) -
                                static_cast<uint64_t>(m_start_ns));
  };
  m_sample_count += later.m_sample_count;
  m_end_ns = std::max(m_end_ns, later.m_end_ns);
  m_oom_count += later.m_oom_count;
  m_omitted = m_omitted || later.m_omitted;
  // Through device() and process(): the caps hold for the merged summary too.
  for (const auto& [uuid, b] : later.m_devices) {
    DevicePeak* const kept = device(uuid);
    if (kept == nullptr) continue;
    DevicePeak& a = *kept;
    a.index = b.index;
    if (!b.name.empty()) set_text(a.name, b.name);
    if (b.total_bytes) a.total_bytes = b.total_bytes;
    if (raise(a.peak_used_bytes, b.peak_used_bytes)) a.peak_offset_ns = rebase(b.peak_offset_ns);
  }
  for (const auto& [key, b] : later.m_processes) {
    ProcessPeak* const kept = process(key.first, key.second, b.device_index);
    if (kept == nullptr) continue;
    ProcessPeak& a = *kept;
    if (!b.command.empty()) set_text(a.command, b.command);
    if (raise(a.peak_used_bytes, b.peak_used_bytes)) {
      a.peak_offset_ns = rebase(b.peak_offset_ns);
      a.parts_at_peak = b.parts_at_peak;
    }
    raise(a.torch_peak_allocated_bytes, b.torch_peak_allocated_bytes);
    raise(a.torch_peak_reserved_bytes, b.torch_peak_reserved_bytes);
    raise(a.step_count, b.step_count);
    raise(a.max_step_peak_allocated_bytes, b.max_step_peak_allocated_bytes);
    if (raise(a.category_step_peak_requested_bytes, b.category_step_peak_requested_bytes)) {
      a.category_step = b.category_step;
      a.category_step_bytes = b.category_step_bytes;
    }
    a.peaks_sampled = a.peaks_sampled || b.peaks_sampled;
    if (!b.polling_reason.empty()) set_text(a.polling_reason, b.polling_reason);
  }
}

std::string RecordingSummary::serialize() const {
  Json devices = Json::array();
  for (const auto& [uuid, d] : m_devices) {
    devices.push_back(Json::array(
        {d.index, d.name, d.uuid, opt(d.total_bytes), opt(d.peak_used_bytes), d.peak_offset_ns}));
  }
  Json processes = Json::array();
  for (const auto& [key, p] : m_processes) {
    Json categories = nullptr;
    if (p.category_step_bytes) categories = *p.category_step_bytes;
    Json entry = Json::array(
        {p.pid, p.device_uuid, p.device_index, p.command, opt(p.peak_used_bytes), p.peak_offset_ns,
         opt(p.torch_peak_allocated_bytes), opt(p.torch_peak_reserved_bytes), opt(p.step_count),
         opt(p.max_step_peak_allocated_bytes), opt(p.category_step),
         opt(p.category_step_peak_requested_bytes), categories, parts_array(p.parts_at_peak)});
    // Only for a polling process, so that other entries stay as they were: its peaks are
    // sampled, and why.
    if (p.peaks_sampled) {
      entry.push_back(true);
      entry.push_back(p.polling_reason);
    }
    processes.push_back(std::move(entry));
  }
  Json doc = {{"v", 1},          {"n", m_sample_count}, {"start", m_start_ns},
              {"end", m_end_ns}, {"ooms", m_oom_count}, {"d", devices},
              {"p", processes}};
  // Only when set, so that digests stay as they were; a reader that does not know it ignores it.
  if (m_omitted) doc["o"] = true;
  const std::vector<std::uint8_t> bytes = Json::to_cbor(doc);
  return {bytes.begin(), bytes.end()};
}

std::optional<RecordingSummary> RecordingSummary::parse(std::string_view bytes) {
  // A digest that does not parse (damaged, or from a later writer) is not used: the caller
  // reads the samples instead.
  try {
    Json doc;
    DepthLimitedSax sax(doc);
    if (!Json::sax_parse(bytes.begin(), bytes.end(), &sax, Json::input_format_t::cbor)) {
      return std::nullopt;
    }
    if (doc.at("v").get<int>() != 1) return std::nullopt;
    RecordingSummary s;
    s.m_sample_count = doc.at("n").get<uint64_t>();
    s.m_start_ns = doc.at("start").get<int64_t>();
    s.m_end_ns = doc.at("end").get<int64_t>();
    s.m_oom_count = doc.at("ooms").get<uint64_t>();
    s.m_omitted = doc.contains("o") && doc.at("o").get<bool>();
    for (const Json& d : doc.at("d")) {
      DevicePeak peak;
      peak.index = d.at(0).get<uint32_t>();
      const std::string name = d.at(1).get<std::string>();
      const std::string uuid = d.at(2).get<std::string>();
      get_opt(d, 3, peak.total_bytes);
      get_opt(d, 4, peak.peak_used_bytes);
      peak.peak_offset_ns = d.at(5).get<int64_t>();
      DevicePeak* const kept = s.device(uuid);
      if (kept == nullptr) continue;
      peak.uuid = uuid;
      *kept = peak;
      s.set_text(kept->name, name);
    }
    for (const Json& p : doc.at("p")) {
      ProcessPeak peak;
      peak.pid = p.at(0).get<uint32_t>();
      peak.device_uuid = p.at(1).get<std::string>();
      peak.device_index = p.at(2).get<uint32_t>();
      const std::string command = p.at(3).get<std::string>();
      get_opt(p, 4, peak.peak_used_bytes);
      peak.peak_offset_ns = p.at(5).get<int64_t>();
      get_opt(p, 6, peak.torch_peak_allocated_bytes);
      get_opt(p, 7, peak.torch_peak_reserved_bytes);
      get_opt(p, 8, peak.step_count);
      get_opt(p, 9, peak.max_step_peak_allocated_bytes);
      get_opt(p, 10, peak.category_step);
      get_opt(p, 11, peak.category_step_peak_requested_bytes);
      if (!p.at(12).is_null()) peak.category_step_bytes = p.at(12).get<CategoryBytes>();
      // Added after the first digests, at the end so that earlier readers ignore it: a digest
      // without it has no breakdown at the peak.
      if (p.size() > 13 && !p.at(13).is_null()) peak.parts_at_peak = parts_from(p.at(13));
      // Added after that, likewise: a polling process's sampled peaks and its reason.
      std::string reason;
      if (p.size() > 14) {
        peak.peaks_sampled = p.at(14).get<bool>();
        reason = p.at(15).get<std::string>();
      }
      ProcessPeak* const kept = s.process(peak.pid, peak.device_uuid, peak.device_index);
      if (kept == nullptr) continue;
      *kept = peak;
      s.set_text(kept->command, command);
      s.set_text(kept->polling_reason, reason);
    }
    // Impossible peaks are no summary: the segment is read instead (summary_plausible.hpp).
    if (!implausible_bytes(s).empty()) return std::nullopt;
    return s;
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

std::string SummaryDigest::take() {
  std::string out = m_summary.serialize();
  m_summary = RecordingSummary();
  return out;
}

RecordingSummary summarise_recording(RecordingReader& reader, RecordingTail& tail) {
  RecordingSummary summary;
  SystemSample sample;
  while (reader.next(sample)) summary.add(sample);
  tail.state = reader.tail_state();
  tail.message = reader.tail_message();
  return summary;
}

}  // namespace vramscope::report
