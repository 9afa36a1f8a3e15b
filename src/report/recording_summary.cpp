// src/report/recording_summary.cpp -- peaks per device and per process over a recording
#include "vramscope/report/recording_summary.hpp"

#include <time.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "vramscope/clock.hpp"
#include "vramscope/core/utf8.hpp"
#include "vramscope/join.hpp"
#include "vramscope/report/json_report.hpp"
#include "vramscope/report/table_report.hpp"
#include "vramscope/report/text_cells.hpp"
#include "vramscope/units.hpp"

namespace vramscope::report {
namespace {

/// Raises `peak` to `value` when higher; returns whether it did.
bool raise(std::optional<uint64_t>& peak, uint64_t value) {
  if (peak && *peak >= value) return false;
  peak = value;
  return true;
}

std::string mib(const std::optional<uint64_t>& bytes) {
  return format_amount(bytes, UnitStyle::Mib);
}

std::string offset_text(int64_t offset_ns) {
  return offset_ns == 0 ? std::string("start") : "+" + format_duration_ns(offset_ns);
}

template <typename T>
nlohmann::ordered_json or_null(const std::optional<T>& value) {
  return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json text_or_null(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

}  // namespace

DevicePeak* RecordingSummary::device(const std::string& uuid, std::size_t position) {
  std::vector<DevicePeak*>& hints = m_scratch.devices;
  if (position < hints.size() && hints[position] != nullptr && hints[position]->uuid == uuid) {
    return hints[position];
  }
  const auto remember = [&](DevicePeak* peak) {
    if (position < max_summary_devices) {
      if (hints.size() <= position) hints.resize(position + 1, nullptr);
      hints[position] = peak;
    }
    return peak;
  };
  if (const auto found = m_devices.find(uuid); found != m_devices.end()) {
    return remember(&found->second);
  }
  if (m_devices.size() >= max_summary_devices ||
      2 * uuid.size() > max_summary_text_bytes - m_text_bytes) {
    m_omitted = true;
    return nullptr;
  }
  m_text_bytes += 2 * uuid.size();
  DevicePeak& peak = m_devices[uuid];
  peak.uuid = uuid;
  return remember(&peak);
}

ProcessPeak* RecordingSummary::process(uint32_t pid, const std::string& uuid, uint32_t device_index,
                                       std::size_t row, const DevicePeak* gpu) {
  // A recording's samples mostly list the same processes in the same order: the entry the
  // same row found in the previous sample is taken when its pid and GPU entry (so its uuid)
  // are this row's, before the map is searched.
  std::vector<RowEntry>& rows = m_scratch.rows;
  if (gpu != nullptr && row < rows.size() && rows[row].gpu == gpu &&
      rows[row].process->pid == pid) {
    rows[row].process->device_index = device_index;
    return rows[row].process;
  }
  // The key's string keeps its memory from one lookup to the next.
  m_scratch.key.first = pid;
  m_scratch.key.second = uuid;
  auto found = m_processes.find(m_scratch.key);
  if (found == m_processes.end()) {
    if (m_processes.size() >= max_summary_processes ||
        2 * uuid.size() > max_summary_text_bytes - m_text_bytes) {
      m_omitted = true;
      return nullptr;
    }
    m_text_bytes += 2 * uuid.size();
    found = m_processes.emplace(std::make_pair(pid, uuid), ProcessPeak{}).first;
    found->second.pid = pid;
    found->second.device_uuid = uuid;
  }
  found->second.device_index = device_index;
  if (gpu != nullptr && row < max_summary_processes) {
    if (rows.size() <= row) rows.resize(row + 1);
    rows[row] = RowEntry{&found->second, gpu};
  }
  return &found->second;
}

void RecordingSummary::set_text(std::string& field, const std::string& value) {
  if (field == value) return;
  const std::size_t kept = m_text_bytes - field.size();
  if (value.size() > max_summary_text_bytes - kept) {
    m_omitted = true;
    return;
  }
  field = value;
  m_text_bytes = kept + value.size();
}

void RecordingSummary::add(const SystemSample& sample) {
  // The span runs from the earliest to the latest timestamp: a clock stepped back (or a forged
  // chunk) may put a later sample before the first one.
  if (m_sample_count == 0) {
    m_start_ns = sample.timestamp_ns;
    m_end_ns = sample.timestamp_ns;
  }
  ++m_sample_count;
  m_start_ns = std::min(m_start_ns, sample.timestamp_ns);
  m_end_ns = std::max(m_end_ns, sample.timestamp_ns);
  const int64_t offset_ns = saturating_sub_ns(sample.timestamp_ns, m_start_ns);
  m_oom_count += sample.ooms.size();

  // This sample's GPU entries by position (null: not kept), which the rows' hints compare.
  std::vector<const DevicePeak*>& gpus = m_scratch.gpus;
  gpus.assign(sample.devices.size(), nullptr);
  for (std::size_t position = 0; position < sample.devices.size(); ++position) {
    const DeviceSample& d = sample.devices[position];
    DevicePeak* const peak = device(d.uuid, position);
    gpus[position] = peak;
    if (peak == nullptr) continue;
    peak->index = d.index;
    if (!d.name.empty()) set_text(peak->name, d.name);
    if (d.total_bytes) peak->total_bytes = d.total_bytes;
    if (d.used_bytes && raise(peak->peak_used_bytes, *d.used_bytes)) {
      peak->peak_offset_ns = offset_ns;
    }
  }

  std::size_t rows = 0;
  for (const JoinedRow& row : m_scratch.joiner.join(sample).rows) {
    const DeviceSample& d = sample.devices[row.device_position];
    ProcessPeak* const kept = process(row.pid, d.uuid, d.index, rows++, gpus[row.device_position]);
    if (kept == nullptr) continue;
    ProcessPeak& peak = *kept;
    if (row.driver != nullptr) {
      if (row.driver->visible && !row.driver->command.empty()) {
        set_text(peak.command, row.driver->command);
      }
      if (row.driver->used_bytes && raise(peak.peak_used_bytes, *row.driver->used_bytes)) {
        peak.peak_offset_ns = offset_ns;
        peak.parts_at_peak = row.torch != nullptr ? row.torch->breakdown : std::nullopt;
      }
    }
    if (row.torch != nullptr) {
      const AllocatorSample& t = *row.torch;
      raise(peak.torch_peak_allocated_bytes, std::max(t.allocated_bytes, t.peak_allocated_bytes));
      raise(peak.torch_peak_reserved_bytes, std::max(t.reserved_bytes, t.peak_reserved_bytes));
      if (t.step > 0) {
        raise(peak.step_count, t.step);
        raise(peak.max_step_peak_allocated_bytes, t.step_peak_allocated_bytes);
      }
      if (t.polling_only) {
        peak.peaks_sampled = true;
        if (!t.polling_reason.empty()) set_text(peak.polling_reason, t.polling_reason);
      }
    }
  }
  if (sample.steps.empty()) return;
  const DevicePositions positions(sample);
  for (const StepRecord& step : sample.steps) {
    const std::size_t found = positions.find(step.device_uuid);
    if (found == DevicePositions::none) continue;
    const DeviceSample* const d = &sample.devices[found];
    ProcessPeak* const kept = process(step.pid, d->uuid, d->index, rows++, gpus[found]);
    if (kept == nullptr) continue;
    ProcessPeak& peak = *kept;
    raise(peak.step_count, step.step);
    raise(peak.max_step_peak_allocated_bytes, step.peak_allocated_bytes);
    if (step.category_bytes &&
        raise(peak.category_step_peak_requested_bytes, step.peak_requested_bytes)) {
      peak.category_step = step.step;
      peak.category_step_bytes = step.category_bytes;
    }
  }
}

const char* tail_state_name(TailState state) {
  switch (state) {
    case TailState::Clean:
      return "clean";
    case TailState::Truncated:
      return "truncated";
    case TailState::Corrupt:
      return "corrupt";
  }
  return "unknown";
}

std::string format_summary_text(const std::string& path, const RecordingMetadata& metadata,
                                const RecordingSummary& summary, const RecordingTail& tail) {
  std::string out = "Recording " + fit_text(path, 200) + " (format " +
                    std::to_string(metadata.format_version) + ", written by vramscope " +
                    fit_text(metadata.writer_version.empty() ? "?" : metadata.writer_version, 40) +
                    ")\n";
  out += "Host      " + fit_text(metadata.hostname, 100) + ", driver " +
         fit_text(metadata.driver_version.empty() ? "N/A" : metadata.driver_version, 40) + "\n";
  if (!metadata.command.empty()) out += "Command   " + fit_text(metadata.command, 200) + "\n";
  if (summary.sample_count() == 0) {
    out += "Span      no samples\n";
  } else {
    out += "Span      " + local_time_text(summary.start_ns()) + " .. " +
           local_time_text(summary.end_ns()) + " (" +
           format_duration_ns(saturating_sub_ns(summary.end_ns(), summary.start_ns())) + ")\n";
  }
  out += "Samples   " + std::to_string(summary.sample_count()) + ", every " +
         format_duration_ns(metadata.interval_ns) + "\n";
  out += std::string("Tail      ") + tail_state_name(tail.state);
  if (tail.state != TailState::Clean) out += ": " + fit_text(tail.message, 200);
  out += "\n";
  if (summary.oom_count() > 0) {
    out += "OOMs      " + std::to_string(summary.oom_count()) + "\n";
  }

  out += "\nGPU  Name                       Total  Peak used  at\n";
  for (const auto& [uuid, d] : summary.devices()) {
    out += pad_left(std::to_string(d.index), 3) + "  " + pad_right(d.name, 22) + " " +
           pad_left(mib(d.total_bytes), 9) + "  " + pad_left(mib(d.peak_used_bytes), 9) + "  " +
           (d.peak_used_bytes ? offset_text(d.peak_offset_ns) : "-") + "\n";
    out += "     " + fit_text(uuid, 75) + "\n";
  }
  if (summary.omitted()) {
    out += "\nNot listed: more GPUs or processes than a summary keeps (" +
           std::to_string(max_summary_devices) + " GPUs, " + std::to_string(max_summary_processes) +
           " processes, " + std::to_string(max_summary_text_bytes >> 20U) +
           " MiB of names and commands)\n";
  }
  if (summary.processes().empty()) return out;
  out += "\nProcess peaks (driver used; torch allocated/reserved when an agent published)\n";
  for (const auto& [key, p] : summary.processes()) {
    out += "  pid " + std::to_string(p.pid) + " on GPU " + std::to_string(p.device_index) +
           ": used " + mib(p.peak_used_bytes);
    if (p.peak_used_bytes) out += " at " + offset_text(p.peak_offset_ns);
    // A polling agent's peaks are the highest its polls saw: at least that.
    const std::string at_least = p.peaks_sampled ? "≥" : "";
    if (p.torch_peak_allocated_bytes) {
      out += ", torch alloc " + at_least + mib(p.torch_peak_allocated_bytes) + " resv " + at_least +
             mib(p.torch_peak_reserved_bytes);
    }
    if (p.step_count) {
      out += ", " + std::to_string(*p.step_count) + " steps, max step peak " + at_least +
             mib(p.max_step_peak_allocated_bytes);
    }
    out += "\n";
    if (!p.command.empty()) out += "      " + fit_text(p.command, 74) + "\n";
    if (p.peaks_sampled) {
      // Wrapped, not cut: the reason ends in its fix.
      std::string why = "≥: polling mode, peaks sampled, not exact";
      if (!p.polling_reason.empty()) why += ": " + p.polling_reason;
      for (const std::string& line : wrap_text(why, 74)) out += "      " + line + "\n";
    }
    if (p.parts_at_peak) {
      // What the driver charged beyond torch at that peak, from the agent's settled pairing.
      const DriverBreakdown& b = *p.parts_at_peak;
      out += "      at the used peak: non-PyTorch " + mib(b.non_pytorch_bytes()) + " = " +
             non_pytorch_parts_text(b, UnitStyle::Mib);
      if (b.private_pool_bytes && *b.private_pool_bytes > 0) {
        out += "; " + mib(b.private_pool_bytes) + " of reserved in private pools";
      }
      out += "\n";
    }
    if (p.category_step_bytes) {
      // What the largest step peak with categories was made of (MiB, like the rest).
      out += "      step " + std::to_string(*p.category_step) + " peak:";
      for (std::size_t c = 0; c < memory_category_count; ++c) {
        out += std::string(c == 0 ? " " : ", ") + std::string(memory_category_names[c]) + " " +
               mib((*p.category_step_bytes)[c]);
      }
      out += "\n";
    }
  }
  return out;
}

std::string format_summary_json(const std::string& path, const RecordingMetadata& metadata,
                                const RecordingSummary& summary, const RecordingTail& tail) {
  using json = nlohmann::ordered_json;
  const auto category_json = [](const std::optional<CategoryBytes>& bytes) {
    if (!bytes) return json(nullptr);
    json out = json::object();
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      out[std::string(memory_category_names[c])] = (*bytes)[c];
    }
    return out;
  };
  json devices = json::array();
  for (const auto& [uuid, d] : summary.devices()) {
    devices.push_back(
        json{{"index", d.index},
             {"name", d.name},
             {"uuid", uuid},
             {"total_bytes", or_null(d.total_bytes)},
             {"peak_used_bytes", or_null(d.peak_used_bytes)},
             {"peak_used_offset_ns", d.peak_used_bytes ? json(d.peak_offset_ns) : json(nullptr)}});
  }
  json processes = json::array();
  for (const auto& [key, p] : summary.processes()) {
    processes.push_back(
        json{{"pid", p.pid},
             {"device_uuid", p.device_uuid},
             {"device_index", p.device_index},
             {"command", text_or_null(p.command)},
             {"peak_used_bytes", or_null(p.peak_used_bytes)},
             {"peak_used_offset_ns", p.peak_used_bytes ? json(p.peak_offset_ns) : json(nullptr)},
             {"driver_parts_at_peak", driver_parts_json(p.parts_at_peak)},
             {"torch_peak_allocated_bytes", or_null(p.torch_peak_allocated_bytes)},
             {"torch_peak_reserved_bytes", or_null(p.torch_peak_reserved_bytes)},
             {"step_count", or_null(p.step_count)},
             {"max_step_peak_allocated_bytes", or_null(p.max_step_peak_allocated_bytes)},
             {"category_step", or_null(p.category_step)},
             {"category_step_bytes", category_json(p.category_step_bytes)},
             {"peaks_sampled", p.peaks_sampled},
             {"polling_reason", text_or_null(p.polling_reason)}});
  }
  const bool empty = summary.sample_count() == 0;
  json doc;
  doc["schema_version"] = 1;
  doc["file"] = path;
  doc["format_version"] = metadata.format_version;
  doc["writer_version"] = text_or_null(metadata.writer_version);
  doc["hostname"] = metadata.hostname;
  doc["driver_version"] = text_or_null(metadata.driver_version);
  doc["command"] = text_or_null(metadata.command);
  doc["created_ns"] = metadata.created_ns;
  doc["interval_ns"] = metadata.interval_ns;
  doc["sample_count"] = summary.sample_count();
  doc["start_ns"] = empty ? json(nullptr) : json(summary.start_ns());
  doc["end_ns"] = empty ? json(nullptr) : json(summary.end_ns());
  doc["duration_ns"] =
      empty ? json(nullptr) : json(saturating_sub_ns(summary.end_ns(), summary.start_ns()));
  doc["tail"] = json{
      {"state", tail_state_name(tail.state)},
      {"message", tail.state == TailState::Clean ? json(nullptr) : text_or_null(tail.message)}};
  doc["oom_count"] = summary.oom_count();
  doc["devices"] = devices;
  doc["omitted"] = summary.omitted();
  doc["processes"] = processes;
  // A recording holds other processes' commands: bad UTF-8 becomes U+FFFD (see json_report).
  return json_text(doc, 2);
}

}  // namespace vramscope::report
