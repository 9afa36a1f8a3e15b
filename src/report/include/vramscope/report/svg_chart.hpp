// src/report/include/vramscope/report/svg_chart.hpp -- one chart as inline SVG: layout, then series drawn into it
//
// Charts are drawn here, on the server side, into plain SVG: the report needs no plotting
// library at view time, so it opens offline in any browser and this repository holds only its
// own code. The plot area is a nested <svg> whose x axis is in bin units (0..bin_count) and whose
// y axis is in pixels; zooming on time is the page's script changing that viewBox, so it never
// needs the data again.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace vramscope::report {

/// Where a chart's parts go, in CSS pixels.
struct ChartLayout {
  double width_px = 1100;
  double height_px = 240;
  /// Room for the y labels on the left and the x labels below.
  double left_px = 78;
  double right_px = 12;
  double top_px = 8;
  double bottom_px = 26;
  double plot_width_px() const { return width_px - left_px - right_px; }
  double plot_height_px() const { return height_px - top_px - bottom_px; }
};

/// What the x axis counts.
enum class AxisKind {
  /// Seconds since the recording began (zoomable).
  Time,
  /// Step numbers.
  Step,
};

/// One chart being drawn. Values are bytes; bins are evenly spaced on the x axis.
class SvgChart {
 public:
  /// `bin_count` bins spanning `x_span` (ns for Time, steps for Step) starting at `x_start`;
  /// the y axis runs from 0 to `y_max_bytes` (raised to a round number).
  SvgChart(const ChartLayout& layout, AxisKind axis, std::size_t bin_count, double x_start,
           double x_span, double y_max_bytes);

  /// A filled band between `lower` and `upper` (bytes per bin); `attributes` are added verbatim
  /// to the path (class, data-*) and must already be escaped.
  void area(const std::vector<double>& lower, const std::vector<double>& upper,
            const std::string& color, const std::string& attributes);
  /// A polyline through `values`; an empty value breaks the line.
  void line(const std::vector<std::optional<double>>& values, const std::string& color,
            const std::string& attributes, bool dashed = false);
  /// A vertical marker at `x` (ns offset or step) linking to `href`, with a tooltip.
  void marker(double x, const std::string& color, const std::string& href,
              const std::string& title);
  /// The finished <svg> element; `attributes` go on it (class, data-*), already escaped.
  std::string finish(const std::string& attributes) const;

 private:
  /// Pixel y of `bytes`, one decimal.
  double y_of(double bytes) const;

  ChartLayout m_layout;
  AxisKind m_axis;
  std::size_t m_bin_count;
  double m_x_start;
  double m_x_span;
  double m_y_max_bytes;
  /// Elements inside the plot area, in drawing order.
  std::string m_plot;
};

/// `text` escaped for HTML text and attribute values (& < > " ').
std::string html_escape(const std::string& text);

}  // namespace vramscope::report
