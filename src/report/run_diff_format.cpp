// src/report/run_diff_format.cpp -- `vramscope diff` as text and as JSON
#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "vramscope/report/run_diff.hpp"
#include "vramscope/report/table_report.hpp"
#include "vramscope/report/text_cells.hpp"
#include "vramscope/units.hpp"

namespace vramscope::report {
namespace {

using json = nlohmann::ordered_json;

std::string mib(const std::optional<uint64_t>& bytes) {
  return format_amount(bytes, UnitStyle::Mib);
}

std::string count_text(const std::optional<uint64_t>& count) {
  return count ? std::to_string(*count) : std::string("-");
}

/// "+439 MiB (+3.0%)", "0 B (+0.0%)", or "-" when a side is missing.
std::string delta_text(const Change& c) {
  const std::optional<int64_t> delta = c.delta();
  if (!delta) return "-";
  std::string out = format_bytes_delta(*delta);
  if (const std::optional<double> percent = c.delta_percent()) {
    std::array<char, 32> text{};
    std::snprintf(text.data(), text.size(), " (%+.1f%%)", *percent);
    out += text.data();
  }
  return out;
}

/// One "  name   A   B   delta" line. A space always parts the columns: a cell too wide for
/// its 10 columns is cut by pad_left() to its last digits, never run into the next.
std::string line(const std::string& name, const std::string& a, const std::string& b,
                 const std::string& delta) {
  return "  " + pad_right(name, 26) + " " + pad_left(a, 10) + " " + pad_left(b, 10) + "  " + delta +
         "\n";
}

std::string bytes_line(const std::string& name, const Change& c) {
  return line(name, mib(c.a), mib(c.b), delta_text(c));
}

std::string run_line(const char* which, const RunProfile& run) {
  const RecordingSummary& s = run.summary;
  std::string out = std::string(which) + fit_text(run.path, 160) + " (" +
                    std::to_string(s.sample_count()) + " samples, " +
                    format_duration_ns(s.end_ns() - s.start_ns());
  if (run.tail.state != TailState::Clean)
    out += std::string(", ") + tail_state_name(run.tail.state);
  return out + ")\n";
}

json or_null(const std::optional<uint64_t>& value) { return value ? json(*value) : json(nullptr); }

json change_json(const Change& c) {
  const std::optional<int64_t> delta = c.delta();
  const std::optional<double> percent = c.delta_percent();
  return json{{"a", or_null(c.a)},
              {"b", or_null(c.b)},
              {"delta", delta ? json(*delta) : json(nullptr)},
              {"delta_percent", percent ? json(*percent) : json(nullptr)}};
}

json run_json(const RunProfile& run) {
  const RecordingSummary& s = run.summary;
  const bool empty = s.sample_count() == 0;
  return json{{"file", run.path},
              {"sample_count", s.sample_count()},
              {"duration_ns", empty ? json(nullptr) : json(s.end_ns() - s.start_ns())},
              {"tail", tail_state_name(run.tail.state)}};
}

json side_json(const std::optional<ProcessPeak>& p) {
  if (!p) return nullptr;
  return json{{"pid", p->pid},
              {"device_uuid", p->device_uuid},
              {"command", p->command.empty() ? json(nullptr) : json(p->command)},
              {"category_step", or_null(p->category_step)},
              {"peaks_sampled", p->peaks_sampled}};
}

}  // namespace

std::string format_diff_text(const RunProfile& a, const RunProfile& b, const RunDiff& diff,
                             const std::optional<double>& threshold_percent,
                             const std::vector<std::string>& grown) {
  std::string out = run_line("A  ", a) + run_line("B  ", b);
  for (const DeviceDiff& d : diff.devices) {
    const std::string name = d.b ? d.b->name : d.a->name;
    out += "\nGPU " + std::to_string(d.index) + "  " + fit_text(name, 40);
    if (d.a && d.b && d.a->uuid != d.b->uuid) out += "  (a different GPU in each run)";
    if (!d.a || !d.b) out += d.a ? "  (in A only)" : "  (in B only)";
    out += "\n" + line("", "A", "B", "delta") + bytes_line("peak used", d.peak_used_bytes);
  }
  for (const ProcessDiff& p : diff.processes) {
    out += "\nGPU " + std::to_string(p.device_index) + "  " + fit_text(p.label, 60);
    if (!p.a || !p.b) out += p.a ? "  (in A only)" : "  (in B only)";
    out += "\n" + line("", "A", "B", "delta");
    out += bytes_line("peak used (driver)", p.peak_used_bytes);
    const bool a_sampled = p.a && p.a->peaks_sampled;
    const bool b_sampled = p.b && p.b->peaks_sampled;
    if (a_sampled || b_sampled) {
      // A polling agent's torch and step peaks are the highest its polls saw: a delta between
      // them says little, and never that a peak did not grow.
      out += std::string("  torch and step peaks of ") +
             (a_sampled && b_sampled ? "A and B"
              : a_sampled            ? "A"
                                     : "B") +
             ": at least these; polling mode, peaks sampled, not exact\n";
    }
    if (p.torch_peak_allocated_bytes.a || p.torch_peak_allocated_bytes.b) {
      out += bytes_line("torch peak allocated", p.torch_peak_allocated_bytes);
      out += bytes_line("torch peak reserved", p.torch_peak_reserved_bytes);
    }
    if (p.non_pytorch_at_peak_bytes.a || p.non_pytorch_at_peak_bytes.b) {
      // The agent's settled pairing at each run's used peak: a context grown by a new CUDA,
      // cuDNN or NCCL release shows here, not in torch's numbers.
      out += bytes_line("non-PyTorch at peak used", p.non_pytorch_at_peak_bytes);
      out += bytes_line("  context", p.context_at_peak_bytes);
      out += bytes_line("  other", p.other_at_peak_bytes);
    }
    if (p.step_count.a || p.step_count.b) {
      out += line("steps", count_text(p.step_count.a), count_text(p.step_count.b), "");
      out += bytes_line("step peak median", p.step_peak_median_bytes);
      out += bytes_line("step peak p99", p.step_peak_p99_bytes);
      out += bytes_line("step peak max", p.step_peak_max_bytes);
    }
    const bool categories = (p.a && p.a->category_step_bytes) || (p.b && p.b->category_step_bytes);
    if (categories) {
      const auto step = [](const std::optional<ProcessPeak>& side) {
        return side && side->category_step ? std::to_string(*side->category_step)
                                           : std::string("-");
      };
      out += line("at the peak step", "step " + step(p.a), "step " + step(p.b), "");
      for (std::size_t c = 0; c < memory_category_count; ++c) {
        out += bytes_line("  " + std::string(memory_category_names[c]), p.category_bytes[c]);
      }
    }
  }
  if (threshold_percent) {
    std::array<char, 32> limit{};
    std::snprintf(limit.data(), limit.size(), "%g%%", *threshold_percent);
    out += "\n";
    if (grown.empty()) {
      out += std::string("No peak grew by more than ") + limit.data() + ".\n";
    } else {
      out += "Peaks that grew by more than " + std::string(limit.data()) + ":\n";
      for (const std::string& g : grown) out += "  " + fit_text(g, 160) + "\n";
    }
  }
  return out;
}

std::string format_diff_json(const RunProfile& a, const RunProfile& b, const RunDiff& diff,
                             const std::optional<double>& threshold_percent,
                             const std::vector<std::string>& grown) {
  json devices = json::array();
  for (const DeviceDiff& d : diff.devices) {
    devices.push_back(json{{"index", d.index},
                           {"name", d.b ? d.b->name : d.a->name},
                           {"a_uuid", d.a ? json(d.a->uuid) : json(nullptr)},
                           {"b_uuid", d.b ? json(d.b->uuid) : json(nullptr)},
                           {"peak_used_bytes", change_json(d.peak_used_bytes)}});
  }
  json processes = json::array();
  for (const ProcessDiff& p : diff.processes) {
    json categories = nullptr;
    if ((p.a && p.a->category_step_bytes) || (p.b && p.b->category_step_bytes)) {
      categories = json::object();
      for (std::size_t c = 0; c < memory_category_count; ++c) {
        categories[std::string(memory_category_names[c])] = change_json(p.category_bytes[c]);
      }
    }
    processes.push_back(
        json{{"device_index", p.device_index},
             {"label", p.label},
             {"rank", p.rank >= 0 ? json(p.rank) : json(nullptr)},
             {"a", side_json(p.a)},
             {"b", side_json(p.b)},
             {"peak_used_bytes", change_json(p.peak_used_bytes)},
             {"torch_peak_allocated_bytes", change_json(p.torch_peak_allocated_bytes)},
             {"torch_peak_reserved_bytes", change_json(p.torch_peak_reserved_bytes)},
             {"non_pytorch_at_peak_bytes", change_json(p.non_pytorch_at_peak_bytes)},
             {"context_at_peak_bytes", change_json(p.context_at_peak_bytes)},
             {"other_at_peak_bytes", change_json(p.other_at_peak_bytes)},
             {"step_count", change_json(p.step_count)},
             {"step_peak_median_bytes", change_json(p.step_peak_median_bytes)},
             {"step_peak_p99_bytes", change_json(p.step_peak_p99_bytes)},
             {"step_peak_max_bytes", change_json(p.step_peak_max_bytes)},
             {"category_step_bytes", categories}});
  }
  json doc;
  doc["schema_version"] = 1;
  doc["a"] = run_json(a);
  doc["b"] = run_json(b);
  doc["devices"] = devices;
  doc["processes"] = processes;
  doc["fail_if_peak_grows_percent"] = threshold_percent ? json(*threshold_percent) : json(nullptr);
  doc["grown"] = grown;
  // Command lines come from other processes and need not be UTF-8: replace, never throw.
  return doc.dump(2, ' ', false, json::error_handler_t::replace);
}

}  // namespace vramscope::report
