// src/report/summary_digest.cpp -- RecordingSummary merged across segments, serialized as the
// digest of a recording's index chunks, and `show`'s reading through the index
//
// merge() must give what add()ing the later samples would: peaks are raised only when strictly
// higher (so the earliest time of a peak wins, as in add()), names and commands take the later
// non-empty value, and peak times are kept relative to the first sample of the whole.
#include <nlohmann/json.hpp>

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
  for (const auto& [uuid, b] : later.m_devices) {
    DevicePeak& a = m_devices[uuid];
    a.index = b.index;
    a.uuid = b.uuid;
    if (!b.name.empty()) a.name = b.name;
    if (b.total_bytes) a.total_bytes = b.total_bytes;
    if (raise(a.peak_used_bytes, b.peak_used_bytes)) a.peak_offset_ns = rebase(b.peak_offset_ns);
  }
  for (const auto& [key, b] : later.m_processes) {
    ProcessPeak& a = m_processes[key];
    a.pid = b.pid;
    a.device_uuid = b.device_uuid;
    a.device_index = b.device_index;
    if (!b.command.empty()) a.command = b.command;
    if (raise(a.peak_used_bytes, b.peak_used_bytes)) a.peak_offset_ns = rebase(b.peak_offset_ns);
    raise(a.torch_peak_allocated_bytes, b.torch_peak_allocated_bytes);
    raise(a.torch_peak_reserved_bytes, b.torch_peak_reserved_bytes);
    raise(a.step_count, b.step_count);
    raise(a.max_step_peak_allocated_bytes, b.max_step_peak_allocated_bytes);
    if (raise(a.category_step_peak_requested_bytes, b.category_step_peak_requested_bytes)) {
      a.category_step = b.category_step;
      a.category_step_bytes = b.category_step_bytes;
    }
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
    processes.push_back(Json::array(
        {p.pid, p.device_uuid, p.device_index, p.command, opt(p.peak_used_bytes), p.peak_offset_ns,
         opt(p.torch_peak_allocated_bytes), opt(p.torch_peak_reserved_bytes), opt(p.step_count),
         opt(p.max_step_peak_allocated_bytes), opt(p.category_step),
         opt(p.category_step_peak_requested_bytes), categories}));
  }
  const Json doc = {{"v", 1},          {"n", m_sample_count}, {"start", m_start_ns},
                    {"end", m_end_ns}, {"ooms", m_oom_count}, {"d", devices},
                    {"p", processes}};
  const std::vector<std::uint8_t> bytes = Json::to_cbor(doc);
  return {bytes.begin(), bytes.end()};
}

std::optional<RecordingSummary> RecordingSummary::parse(std::string_view bytes) {
  // A digest that does not parse (damaged, or from a later writer) is not used: the caller
  // reads the samples instead.
  try {
    const Json doc = Json::from_cbor(bytes.begin(), bytes.end());
    if (doc.at("v").get<int>() != 1) return std::nullopt;
    RecordingSummary s;
    s.m_sample_count = doc.at("n").get<uint64_t>();
    s.m_start_ns = doc.at("start").get<int64_t>();
    s.m_end_ns = doc.at("end").get<int64_t>();
    s.m_oom_count = doc.at("ooms").get<uint64_t>();
    for (const Json& d : doc.at("d")) {
      DevicePeak peak;
      peak.index = d.at(0).get<uint32_t>();
      peak.name = d.at(1).get<std::string>();
      peak.uuid = d.at(2).get<std::string>();
      get_opt(d, 3, peak.total_bytes);
      get_opt(d, 4, peak.peak_used_bytes);
      peak.peak_offset_ns = d.at(5).get<int64_t>();
      s.m_devices[peak.uuid] = peak;
    }
    for (const Json& p : doc.at("p")) {
      ProcessPeak peak;
      peak.pid = p.at(0).get<uint32_t>();
      peak.device_uuid = p.at(1).get<std::string>();
      peak.device_index = p.at(2).get<uint32_t>();
      peak.command = p.at(3).get<std::string>();
      get_opt(p, 4, peak.peak_used_bytes);
      peak.peak_offset_ns = p.at(5).get<int64_t>();
      get_opt(p, 6, peak.torch_peak_allocated_bytes);
      get_opt(p, 7, peak.torch_peak_reserved_bytes);
      get_opt(p, 8, peak.step_count);
      get_opt(p, 9, peak.max_step_peak_allocated_bytes);
      get_opt(p, 10, peak.category_step);
      get_opt(p, 11, peak.category_step_peak_requested_bytes);
      if (!p.at(12).is_null()) peak.category_step_bytes = p.at(12).get<CategoryBytes>();
      s.m_processes[{peak.pid, peak.device_uuid}] = peak;
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

RecordingSummary summarise_recording(RecordingReader& reader, bool use_index, RecordingTail& tail,
                                     std::size_t* indexed_segments) {
  RecordingSummary summary;
  std::size_t used = 0;
  if (use_index) {
    const std::vector<RecordingSegment> segments = reader.segments();
    RecordingSummary merged;
    bool whole = !segments.empty();
    for (const RecordingSegment& segment : segments) {
      std::optional<RecordingSummary> part = RecordingSummary::parse(segment.digest);
      if (!part || part->sample_count() != segment.sample_count) {
        whole = false;
        break;
      }
      merged.merge(*part);
    }
    if (whole) {
      summary = std::move(merged);
      used = segments.size();
      reader.seek(segments.back().end_offset);
    }
  }
  SystemSample sample;
  while (reader.next(sample)) summary.add(sample);
  tail.state = reader.tail_state();
  tail.message = reader.tail_message();
  if (indexed_segments != nullptr) *indexed_segments = used;
  return summary;
}

}  // namespace vramscope::report
