// src/view/render_gpu.cpp -- one GPU's panel: title, numbers, the split memory bar, the history graph
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "vramscope/units.hpp"
#include "vramscope/view/render.hpp"

namespace vramscope::view::detail {

namespace {

/// "NVIDIA H200" -> "H200": the vendor is implied and the cells are scarce in compact mode.
std::string short_name(const std::string& name) {
  constexpr std::string_view vendor = "NVIDIA ";
  return name.starts_with(vendor) ? name.substr(vendor.size()) : name;
}

/// One entry of a bar's legend; the same glyph and style as its bar segment.
struct LegendItem {
  char32_t glyph;
  char ascii;
  Style style;
  const char* label;
  uint64_t bytes;
};

std::vector<LegendItem> legend_items(const GpuView& gpu) {
  const MemorySplit& s = gpu.split;
  std::vector<LegendItem> items;
  if (s.has_agents) {
    items.push_back({U'█', '#', allocated_style, "alloc", s.allocated_bytes});
    items.push_back({U'▓', '+', cached_style, "cached", s.cached_free_bytes});
    items.push_back({U'▒', '%', non_pytorch_style, "non-torch", s.non_pytorch_bytes});
    items.push_back({U'░', '=', other_style, "other", s.other_bytes});
  } else {
    items.push_back({U'░', '=', other_style, "used", s.other_bytes});
  }
  if (s.driver_reserved_bytes > 0) {
    items.push_back({U'▪', '-', driver_style, "driver", s.driver_reserved_bytes});
  }
  items.push_back({U'·', '.', free_style, "free", s.free_bytes});
  return items;
}

void draw_legend(const GpuView& gpu, const Rect& area, Canvas& canvas) {
  if (area.empty()) return;
  int x = area.x;
  for (const auto& item : legend_items(gpu)) {
    const std::string text = std::string(item.label) + " " + format_bytes_compact(item.bytes);
    // Whole items only: a legend cut mid-number would be read as a different number.
    if (x + 2 + text_width(text) > area.right()) break;
    canvas.put(area, x, area.y, canvas.unicode() ? item.glyph : item.ascii, item.style);
    x = canvas.text(area, x + 2, area.y, text, Style{}) + 2;
  }
  if (!gpu.split.has_agents) {
    canvas.text(area, x, area.y, "(no PyTorch agent)", free_style);
  }
}

void draw_bar(const GpuView& gpu, const Rect& area, Canvas& canvas) {
  const MemorySplit& s = gpu.split;
  std::vector<BarSegment> segments;
  if (s.has_agents) {
    segments.push_back({s.allocated_bytes, allocated_style, U'█', '#'});
    segments.push_back({s.cached_free_bytes, cached_style, U'▓', '+'});
    segments.push_back({s.non_pytorch_bytes, non_pytorch_style, U'▒', '%'});
  }
  segments.push_back({s.other_bytes, other_style, U'░', '='});
  segments.push_back({s.driver_reserved_bytes, driver_style, U'▪', '-'});
  canvas.bar(area, segments, s.total_bytes, free_style);
}

std::string summary_text(const GpuView& gpu) {
  const auto& d = gpu.device;
  if (d.lost) return "LOST";
  if (!d.total_bytes || !d.used_bytes) return "n/a";
  // The driver's own "used", so that the number matches nvidia-smi's.
  const uint64_t used = *d.used_bytes;
  const uint64_t percent = *d.total_bytes == 0 ? 0 : used * 100 / *d.total_bytes;
  return format_bytes_compact(used) + "/" + format_bytes_compact(*d.total_bytes) + " " +
         std::to_string(percent) + "%";
}

/// History graph: driver-used behind torch-allocated, scaled to the GPU's total, with a dotted
/// line at the peak of the visible window and labels for the peak and the time span.
void draw_graph(const GpuView& gpu, const Rect& area, Canvas& canvas) {
  const uint64_t total = gpu.split.total_bytes;
  if (area.empty() || total == 0 || gpu.history.empty()) return;
  const std::size_t shown = std::min<std::size_t>(gpu.history.size(), area.width);
  const std::size_t first = gpu.history.size() - shown;
  std::vector<double> used(shown, 0.0);
  std::vector<double> torch(shown, 0.0);
  uint64_t peak_used = 0;
  uint64_t peak_torch = 0;
  bool any_torch = false;
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& point = gpu.history[first + i];
    const uint64_t u = point.used_bytes.value_or(0);
    const uint64_t t = point.torch_allocated_bytes.value_or(0);
    used[i] = static_cast<double>(u) / static_cast<double>(total);
    torch[i] = static_cast<double>(t) / static_cast<double>(total);
    peak_used = std::max(peak_used, u);
    peak_torch = std::max(peak_torch, t);
    any_torch = any_torch || point.torch_allocated_bytes.has_value();
  }
  const std::vector<GraphSeries> series{{used, other_style, ':'}, {torch, allocated_style, '#'}};
  canvas.graph(area, any_torch ? std::span(series) : std::span(series).first(1));

  const long peak_eighths =
      std::lround(static_cast<double>(peak_used) / static_cast<double>(total) * area.height * 8);
  if (peak_eighths > 0) {
    const int y = area.bottom() - 1 - static_cast<int>((peak_eighths - 1) / 8);
    for (int x = area.x; x < area.right(); ++x) {
      if (canvas.at(x, y).glyph == U' ')
        canvas.put(area, x, y, canvas.unicode() ? U'┈' : U'-', free_style);
    }
  }
  std::string label = "peak " + format_bytes_compact(peak_used);
  if (any_torch) label += " torch " + format_bytes_compact(peak_torch);
  canvas.text(area, area.x, area.y, label, Style{Color::Default, Color::Default, AttrDim});
  const int64_t span_ns = gpu.history.back().timestamp_ns - gpu.history[first].timestamp_ns;
  if (span_ns > 0) {
    canvas.text_right(area.row(0), "last " + format_duration_compact(span_ns),
                      Style{Color::Default, Color::Default, AttrDim});
  }
}

}  // namespace

void render_gpu(const GpuView& gpu, const GpuPanelLayout& panel, Canvas& canvas) {
  const auto& d = gpu.device;
  const bool unicode = canvas.unicode();
  if (panel.boxed) {
    canvas.box(panel.panel, free_style);
    std::string title = " GPU " + std::to_string(d.index) + (unicode ? " · " : " - ") + d.name;
    if (d.mig_enabled.value_or(false)) title += " [MIG]";
    canvas.text(panel.title, panel.title.x, panel.title.y, title + " ", title_style);
    canvas.text_right(panel.summary, " " + summary_text(gpu) + " ", d.lost ? error_style : Style{});
  } else {
    canvas.text(panel.title, panel.title.x, panel.title.y,
                std::to_string(d.index) + " " + short_name(d.name), title_style);
    canvas.text_right(panel.summary, summary_text(gpu), d.lost ? error_style : Style{});
  }
  if (d.lost || !d.total_bytes) {
    // Say why there is nothing to draw instead of drawing an empty bar that reads as "idle".
    const std::string why = d.lost ? "GPU lost (fallen off the bus); other GPUs keep updating"
                                   : (d.error.empty() ? "memory numbers not available" : d.error);
    canvas.text(panel.bar, panel.bar.x, panel.bar.y, why, error_style);
    return;
  }
  draw_bar(gpu, panel.bar, canvas);
  draw_legend(gpu, panel.legend, canvas);
  draw_graph(gpu, panel.graph, canvas);
}

}  // namespace vramscope::view::detail
