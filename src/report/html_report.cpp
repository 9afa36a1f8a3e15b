// src/report/html_report.cpp -- assembles the report page: summary, GPU and process charts, OOMs
#include "vramscope/report/html_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "vramscope/clock.hpp"
#include "vramscope/report/svg_chart.hpp"
#include "vramscope/report/table_report.hpp"
#include "vramscope/report/text_cells.hpp"
#include "vramscope/units.hpp"

namespace vramscope::report {
namespace {

/// Process colours (stacking order) and the decomposition's three parts.
constexpr std::array<const char*, 8> palette = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};
constexpr const char* color_allocated = "#3b6fb6";
constexpr const char* color_cached = "#9ec3ef";
constexpr const char* color_non_pytorch = "#f0a04b";
constexpr std::array<const char*, memory_category_count> category_colors = {
    "#4e79a7", "#59a14f", "#b07aa1", "#f28e2b", "#e15759", "#bab0ac"};

std::string mib(const std::optional<uint64_t>& bytes) {
  return format_amount(bytes, UnitStyle::Mib);
}

/// A table cell whose exact value the tests (and scripts) can read back: data-bytes.
/// `sampled`: is the value the highest a polling agent saw, at least that (shown "≥")?
std::string bytes_cell(const char* field, const std::optional<uint64_t>& bytes,
                       bool sampled = false) {
  if (!bytes) return fmt::format("<td data-field=\"{}\" data-bytes=\"\">-</td>", field);
  if (sampled) {
    return fmt::format(
        "<td data-field=\"{}\" data-bytes=\"{}\" data-sampled=\"true\" title=\"at least {} "
        "bytes: polling mode, peaks sampled, not exact\">≥{}</td>",
        field, *bytes, *bytes, mib(bytes));
  }
  return fmt::format("<td data-field=\"{}\" data-bytes=\"{}\" title=\"{} bytes\">{}</td>", field,
                     *bytes, *bytes, mib(bytes));
}

/// Columns of a command line in the process table (the page's JSON holds it whole): a summary
/// may hold 16,384 of them, 64 KiB each.
constexpr std::size_t max_command_columns = 300;

/// "GPU 0 · rank 1 · pid 4021": how the page names a process.
std::string process_label(const TimelineProcess& p) {
  std::string out = "GPU " + std::to_string(p.device_index);
  if (p.other) return out + " · other processes";
  if (p.rank >= 0) out += " · rank " + std::to_string(p.rank);
  return out + " · pid " + std::to_string(p.pid);
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string out = "<div class=\"legend\">";
  for (const auto& [color, name] : items) {
    out += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", color, html_escape(name));
  }
  return out + "</div>\n";
}

std::string header_html(const RunProfile& run) {
  const RecordingSummary& s = run.summary;
  std::string out = "<header><h1>vramscope report</h1><dl>";
  const auto item = [&out](const char* name, const std::string& value) {
    out += fmt::format("<dt>{}</dt><dd>{}</dd>", name, html_escape(value));
  };
  item("File", run.path);
  item("Host", run.metadata.hostname + ", driver " +
                   (run.metadata.driver_version.empty() ? "N/A" : run.metadata.driver_version));
  if (!run.metadata.command.empty()) item("Command", run.metadata.command);
  if (s.sample_count() > 0) {
    item("Span", local_time_text(s.start_ns()) + " .. " + local_time_text(s.end_ns()) + " (" +
                     format_duration_ns(saturating_sub_ns(s.end_ns(), s.start_ns())) + ")");
  }
  item("Samples", std::to_string(s.sample_count()) + ", every " +
                      format_duration_ns(run.metadata.interval_ns));
  item("Tail", std::string(tail_state_name(run.tail.state)) +
                   (run.tail.state == TailState::Clean ? "" : ": " + run.tail.message));
  item("OOMs", std::to_string(s.oom_count()));
  return out + "</dl></header>\n";
}

std::string summary_html(const RunProfile& run) {
  std::string out =
      "<section id=\"summary\"><h2>Summary</h2>\n<table class=\"devices\"><tr><th>GPU</th>"
      "<th>Name</th><th>Total</th><th>Peak used</th><th>at</th></tr>\n";
  for (const auto& [uuid, d] : run.summary.devices()) {
    out += fmt::format("<tr data-device-uuid=\"{}\"><td>{}</td><td>{}</td>{}{}<td>{}</td></tr>\n",
                       html_escape(uuid), d.index, html_escape(d.name),
                       bytes_cell("total_bytes", d.total_bytes),
                       bytes_cell("peak_used_bytes", d.peak_used_bytes),
                       d.peak_used_bytes ? "+" + format_duration_ns(d.peak_offset_ns) : "-");
  }
  out +=
      "</table>\n<table class=\"processes\"><tr><th>GPU</th><th>pid</th><th>Command</th>"
      "<th>Peak used</th><th>Torch allocated</th><th>Torch reserved</th><th>Steps</th>"
      "<th>Max step peak</th></tr>\n";
  for (const auto& [key, p] : run.summary.processes()) {
    out += fmt::format(
        "<tr data-pid=\"{}\" data-device-uuid=\"{}\"><td>{}</td><td>{}</td><td "
        "class=\"cmd\">{}</td>"
        "{}{}{}<td data-field=\"step_count\" data-count=\"{}\">{}</td>{}</tr>\n",
        p.pid, html_escape(p.device_uuid), p.device_index, p.pid,
        html_escape(fit_text(p.command, max_command_columns)),
        bytes_cell("peak_used_bytes", p.peak_used_bytes),
        bytes_cell("torch_peak_allocated_bytes", p.torch_peak_allocated_bytes, p.peaks_sampled),
        bytes_cell("torch_peak_reserved_bytes", p.torch_peak_reserved_bytes, p.peaks_sampled),
        p.step_count ? std::to_string(*p.step_count) : "",
        p.step_count ? std::to_string(*p.step_count) : "-",
        bytes_cell("max_step_peak_allocated_bytes", p.max_step_peak_allocated_bytes,
                   p.peaks_sampled));
  }
  return out + "</table></section>\n";
}

/// Per GPU: every process's driver use stacked, the device's used and the agents' sums on top.
std::string device_html(const Timeline& t, const TimelineDevice& d, const HtmlReportOptions&) {
  const std::size_t n = t.bin_count;
  std::vector<double> lower(n, 0);
  std::vector<std::pair<std::string, std::string>> items;
  std::string layers;
  double y_max = 0;
  std::vector<std::optional<double>> used(n), allocated(n), reserved(n);
  bool any_torch = false;
  for (std::size_t i = 0; i < n; ++i) {
    used[i] = d.bins[i].used_bytes;
    allocated[i] = d.bins[i].allocated_bytes;
    reserved[i] = d.bins[i].reserved_bytes;
    y_max = std::max({y_max, d.bins[i].used_bytes, d.bins[i].reserved_bytes});
  }
  struct Layer {
    std::size_t position;
    std::vector<double> upper;
  };
  std::vector<Layer> stack;
  for (std::size_t k = 0; k < t.processes.size(); ++k) {
    const TimelineProcess& p = t.processes[k];
    if (p.device_uuid != d.uuid) continue;
    any_torch = any_torch || p.any_torch;
    std::vector<double> upper(n);
    for (std::size_t i = 0; i < n; ++i) {
      const ProcessBin& b = p.bins[i];
      upper[i] = lower[i] + (p.any_driver ? b.used_bytes : b.reserved_bytes);
      y_max = std::max(y_max, upper[i]);
    }
    stack.push_back({k, upper});
    lower = std::move(upper);
  }
  SvgChart chart(ChartLayout{}, AxisKind::Time, n, 0,
                 static_cast<double>(t.bin_ns) * static_cast<double>(n), y_max);
  std::vector<double> base(n, 0);
  for (const Layer& layer : stack) {
    const char* color = palette[layer.position % palette.size()];
    chart.area(base, layer.upper, color,
               fmt::format("class=\"layer\" data-proc=\"{}\"", layer.position));
    items.emplace_back(color, process_label(t.processes[layer.position]));
    base = layer.upper;
  }
  chart.line(used, "#111", "class=\"used\"");
  items.emplace_back("#111", "GPU used (driver)");
  if (any_torch) {
    chart.line(reserved, "#7b3fa0", "class=\"reserved\"", true);
    chart.line(allocated, "#1f4e9a", "class=\"allocated\"");
    items.emplace_back("#7b3fa0", "PyTorch reserved (all agents)");
    items.emplace_back("#1f4e9a", "PyTorch allocated (all agents)");
  }
  for (std::size_t k = 0; k < t.ooms.size(); ++k) {
    const OomMark& m = t.ooms[k];
    if (m.device_index != d.index) continue;
    chart.marker(static_cast<double>(m.offset_ns), "#d00", fmt::format("#oom-{}", k),
                 fmt::format("OOM: pid {} asked for {}", m.record.pid,
                             format_bytes(m.record.requested_bytes)));
  }
  return fmt::format(
      "<section class=\"gpu\" data-device-uuid=\"{}\"><h2>GPU {} · {} · {} total</h2>\n"
      "<p class=\"note\">Processes stacked by driver-side use; every bin shows its "
      "maximum.</p>\n{}{}"
      "</section>\n",
      html_escape(d.uuid), d.index, html_escape(d.name), format_bytes(d.total_bytes), legend(items),
      chart.finish(fmt::format("class=\"chart timeline\" data-chart=\"gpu-{}\"", d.index)));
}

/// One process: the decomposition of its driver use over time, its step peaks, its categories.
std::string process_html(const RunProfile& run, const Timeline& t, std::size_t k,
                         const HtmlReportOptions& options) {
  const TimelineProcess& p = t.processes[k];
  const std::size_t n = t.bin_count;
  std::vector<double> zero(n, 0), a(n), ac(n), acn(n);
  std::vector<std::optional<double>> used(n), allocated(n), reserved(n);
  double y_max = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ProcessBin& b = p.bins[i];
    a[i] = b.peak_allocated_bytes;
    ac[i] = a[i] + b.peak_cached_free_bytes;
    acn[i] = ac[i] + b.peak_outside_pytorch_bytes;
    if (b.seen && p.any_driver) used[i] = b.used_bytes;
    if (b.seen && p.any_torch) {
      allocated[i] = b.allocated_bytes;
      reserved[i] = b.reserved_bytes;
    }
    y_max = std::max({y_max, acn[i], b.used_bytes, b.reserved_bytes});
  }
  SvgChart chart(ChartLayout{}, AxisKind::Time, n, 0,
                 static_cast<double>(t.bin_ns) * static_cast<double>(n), y_max);
  chart.area(zero, a, color_allocated, "class=\"part allocated\"");
  chart.area(a, ac, color_cached, "class=\"part cached-free\"");
  chart.area(ac, acn, color_non_pytorch, "class=\"part non-pytorch\"");
  chart.line(used, "#111", "class=\"used\"");
  if (p.any_torch) chart.line(reserved, "#7b3fa0", "class=\"reserved\"", true);
  for (std::size_t o = 0; o < t.ooms.size(); ++o) {
    if (t.ooms[o].record.pid != p.pid || t.ooms[o].device_index != p.device_index) continue;
    chart.marker(static_cast<double>(t.ooms[o].offset_ns), "#d00", fmt::format("#oom-{}", o),
                 "OOM");
  }
  std::string out = fmt::format(
      "<section class=\"proc\" data-proc=\"{}\"><h3>{}</h3><p class=\"cmd\">{}</p>\n"
      "<h4>Driver use = allocated + cached free + non-PyTorch</h4>\n{}{}\n",
      k, html_escape(process_label(p)), html_escape(p.command),
      legend({{color_allocated, "allocated (live tensors)"},
              {color_cached, "cached free (reserved - allocated)"},
              {color_non_pytorch, "non-PyTorch (context, NCCL, libraries)"},
              {"#111", "driver used"},
              {"#7b3fa0", "PyTorch reserved"}}),
      chart.finish(fmt::format("class=\"chart timeline\" data-chart=\"proc-{}\"", k)));

  const auto peak = run.summary.processes().find({p.pid, p.device_uuid});
  const bool sampled = peak != run.summary.processes().end() && peak->second.peaks_sampled;
  const auto steps = run.steps.find({p.pid, p.device_uuid});
  if (steps != run.steps.end() && !steps->second.steps.empty()) {
    const std::vector<StepPoint>& s = steps->second.steps;
    const std::size_t bins = std::min(s.size(), options.bins);
    std::vector<std::optional<double>> peak_allocated(bins), peak_reserved(bins);
    double s_max = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::size_t bin = i * bins / s.size();
      peak_allocated[bin] =
          std::max(peak_allocated[bin].value_or(0), static_cast<double>(s[i].peak_allocated_bytes));
      peak_reserved[bin] =
          std::max(peak_reserved[bin].value_or(0), static_cast<double>(s[i].peak_reserved_bytes));
      s_max = std::max({s_max, *peak_allocated[bin], *peak_reserved[bin]});
    }
    ChartLayout small;
    small.height_px = 180;
    SvgChart step_chart(small, AxisKind::Step, bins, static_cast<double>(s.front().step),
                        static_cast<double>(s.back().step - s.front().step + 1), s_max);
    step_chart.line(peak_allocated, color_allocated, "class=\"step-allocated\"");
    step_chart.line(peak_reserved, "#7b3fa0", "class=\"step-reserved\"", true);
    out += fmt::format(
        "<h4>Step peaks ({} steps){}</h4>\n{}{}\n", s.size(),
        sampled ? "<span class=\"sampled\" data-sampled=\"true\">: at least these; polling "
                  "mode, peaks sampled, not exact</span>"
                : "",
        legend({{color_allocated, "peak allocated"}, {"#7b3fa0", "peak reserved"}}),
        step_chart.finish(fmt::format("class=\"chart steps\" data-chart=\"steps-{}\"", k)));
  }
  if (peak != run.summary.processes().end() && peak->second.category_step_bytes) {
    const CategoryBytes& bytes = *peak->second.category_step_bytes;
    uint64_t total = 0;
    for (const uint64_t b : bytes) total += b;
    std::string bar, items;
    double x = 0;
    for (std::size_t c = 0; c < memory_category_count; ++c) {
      const double w =
          total > 0 ? static_cast<double>(bytes[c]) / static_cast<double>(total) * 1000 : 0;
      bar += fmt::format(
          "<rect x=\"{:.1f}\" y=\"0\" width=\"{:.1f}\" height=\"28\" fill=\"{}\"><title>{} "
          "{}</title></rect>",
          x, w, category_colors[c], memory_category_names[c], format_bytes(bytes[c]));
      items += fmt::format(
          "<span data-category=\"{}\" data-bytes=\"{}\"><i style=\"background:{}\"></i>{} "
          "{}</span>",
          memory_category_names[c], bytes[c], category_colors[c], memory_category_names[c],
          format_bytes(bytes[c]));
      x += w;
    }
    out += fmt::format(
        "<h4>What step {} peak was made of ({} requested)</h4>\n<div class=\"legend\">{}</div>"
        "<svg class=\"chart categories\" data-chart=\"categories-{}\" width=\"1000\" height=\"28\" "
        "viewBox=\"0 0 1000 28\">{}</svg>\n",
        *peak->second.category_step, format_bytes(total), items, k, bar);
  }
  return out + "</section>\n";
}

std::string oom_html(const Timeline& t) {
  if (t.ooms.empty()) return "";
  std::string out =
      "<section id=\"ooms\"><h2>Out-of-memory errors</h2><table><tr><th>When</th><th>GPU</th>"
      "<th>pid</th><th>Requested</th><th>Free</th><th>Allocated</th><th>Reserved</th>"
      "<th>Post-mortem</th></tr>\n";
  for (std::size_t k = 0; k < t.ooms.size(); ++k) {
    const OomRecord& r = t.ooms[k].record;
    // The agent names its post-mortem after the pid and the local time of the OOM.
    const std::string file = fmt::format("vramscope-oom-{}-{}.txt", r.pid,
                                         local_time_text(r.timestamp_ns, TimeText::FileStamp));
    out += fmt::format(
        "<tr "
        "id=\"oom-{}\"><td>+{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td>"
        "<td><a href=\"{}\">{}</a></td></tr>\n",
        k, format_duration_ns(t.ooms[k].offset_ns), t.ooms[k].device_index, r.pid,
        format_bytes(r.requested_bytes), format_bytes(r.device_free_bytes),
        format_bytes(r.allocated_bytes), format_bytes(r.reserved_bytes), file, file);
  }
  return out +
         "</table><p class=\"note\">Post-mortems are written by the agent where the program ran "
         "($VRAMSCOPE_OOM_DIR or its working directory); the links work when they sit beside "
         "this page. See docs/oom-advice.md.</p></section>\n";
}

/// `json` made safe inside <script>: "</script" or "<!--" in a command line would end or
/// change the element, so < > & become JSON escapes (the parsed value is the same).
std::string script_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (const char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string format_html_report(const RunProfile& run, const Timeline& t,
                               const HtmlReportOptions& options) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>vramscope report: "
      "{}</title>\n"
      "<script>window.vramscopeErrors=[];window.addEventListener('error',function(e){{"
      "window.vramscopeErrors.push(String(e.message));}});</script>\n<style>{}</style></"
      "head>\n<body>\n",
      html_escape(run.path), html_report_style());
  out += header_html(run);
  out +=
      "<nav class=\"controls\"><label>Process <select id=\"proc-select\"><option "
      "value=\"all\">all</option>";
  for (std::size_t k = 0; k < t.processes.size(); ++k) {
    out += fmt::format("<option value=\"{}\">{}</option>", k,
                       html_escape(process_label(t.processes[k])));
  }
  out +=
      "</select></label> <button id=\"zoom-reset\" type=\"button\">Reset zoom</button> "
      "<span id=\"zoom-label\">Drag across a timeline to zoom in on time.</span></nav>\n";
  out += summary_html(run);
  if (t.omitted) {
    out += fmt::format(
        "<p class=\"note omitted\">This recording names more than the page charts: at most {} "
        "GPUs and {} processes get their own series (later processes are summed per GPU as "
        "\"other processes\") and {} OOMs are listed.</p>\n",
        max_timeline_devices, max_timeline_processes, max_timeline_ooms);
  }
  for (const TimelineDevice& d : t.devices) out += device_html(t, d, options);
  for (std::size_t k = 0; k < t.processes.size(); ++k) out += process_html(run, t, k, options);
  out += oom_html(t);
  std::string summary_json;
  try {
    summary_json = format_summary_json(run.path, run.metadata, run.summary, run.tail);
  } catch (const std::exception&) {
    // Text that is not UTF-8 cannot be JSON; the tables above still show every number.
    summary_json = "null";
  }
  out += "<script type=\"application/json\" id=\"summary-json\">" + script_safe(summary_json) +
         "</script>\n";
  out += fmt::format("<script>{}</script>\n</body></html>\n", html_report_script());
  return out;
}

}  // namespace vramscope::report
