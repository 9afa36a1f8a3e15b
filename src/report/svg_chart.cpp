// src/report/svg_chart.cpp -- axes, bands, lines and markers as SVG text
#include "vramscope/report/svg_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "vramscope/units.hpp"

namespace vramscope::report {
namespace {

/// The y grid step: a power-of-two number of MiB giving at most five lines up to `max_bytes`.
double byte_step(double max_bytes) {
  double step = 1024.0 * 1024.0;  // 1 MiB
  while (max_bytes / step > 5) step *= 2;
  return step;
}

/// A 1-2-5 step giving about six labels over `span` (seconds or steps).
double nice_step(double span) {
  if (span <= 0) return 1;
  const double raw = span / 6;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters from a hostile command line never reach the page.
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\t') ? '?' : c;
    }
  }
  return out;
}

SvgChart::SvgChart(const ChartLayout& layout, AxisKind axis, std::size_t bin_count, double x_start,
                   double x_span, double y_max_bytes)
    : m_layout(layout),
      m_axis(axis),
      m_bin_count(std::max<std::size_t>(bin_count, 1)),
      m_x_start(x_start),
      m_x_span(x_span > 0 ? x_span : 1) {
  const double max = std::max(y_max_bytes * 1.05, 1024.0 * 1024.0);
  const double step = byte_step(max);
  m_y_max_bytes = std::ceil(max / step) * step;
}

double SvgChart::y_of(double bytes) const {
  const double h = m_layout.plot_height_px();
  return std::round((h - bytes / m_y_max_bytes * h) * 10) / 10;
}

void SvgChart::area(const std::vector<double>& lower, const std::vector<double>& upper,
                    const std::string& color, const std::string& attributes) {
  const std::size_t n = std::min({lower.size(), upper.size(), m_bin_count});
  if (n == 0) return;
  // Each bin is a flat segment [i, i+1]: a peak stays visible however narrow its bin.
  std::string d = fmt::format("M0,{}", y_of(upper[0]));
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && upper[i] != upper[i - 1]) d += fmt::format("V{}", y_of(upper[i]));
    d += fmt::format("H{}", i + 1);
  }
  d += fmt::format("V{}", y_of(lower[n - 1]));
  for (std::size_t i = n; i-- > 0;) {
    if (i + 1 < n && lower[i] != lower[i + 1]) d += fmt::format("V{}", y_of(lower[i]));
    d += fmt::format("H{}", i);
  }
  m_plot += fmt::format("<path d=\"{}Z\" fill=\"{}\" stroke=\"none\" {}/>\n", d, color, attributes);
}

void SvgChart::line(const std::vector<std::optional<double>>& values, const std::string& color,
                    const std::string& attributes, bool dashed) {
  std::string d;
  bool drawing = false;
  double last = 0;
  for (std::size_t i = 0; i < std::min(values.size(), m_bin_count); ++i) {
    if (!values[i]) {
      drawing = false;
      continue;
    }
    const double y = y_of(*values[i]);
    if (!drawing) {
      d += fmt::format("M{},{}", i, y);
    } else if (y != last) {
      d += fmt::format("V{}", y);
    }
    d += fmt::format("H{}", i + 1);
    drawing = true;
    last = y;
  }
  if (d.empty()) return;
  m_plot += fmt::format(
      "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} "
      "vector-effect=\"non-scaling-stroke\" {}/>\n",
      d, color, dashed ? " stroke-dasharray=\"5 3\"" : "", attributes);
}

void SvgChart::marker(double x, const std::string& color, const std::string& href,
                      const std::string& title) {
  const double bin = std::clamp((x - m_x_start) / m_x_span * static_cast<double>(m_bin_count), 0.0,
                                static_cast<double>(m_bin_count));
  m_plot += fmt::format(
      "<a href=\"{}\"><line class=\"marker\" x1=\"{:.2f}\" x2=\"{:.2f}\" y1=\"0\" y2=\"{}\" "
      "stroke=\"{}\" stroke-width=\"3\" vector-effect=\"non-scaling-stroke\"><title>{}</title>"
      "</line></a>\n",
      href, bin, bin, m_layout.plot_height_px(), color, html_escape(title));
}

std::string SvgChart::finish(const std::string& attributes) const {
  const ChartLayout& l = m_layout;
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "data-x-start=\"{}\" data-x-span=\"{}\" data-bins=\"{}\" data-axis=\"{}\" {}>\n",
      l.width_px, l.height_px, l.width_px, l.height_px, m_x_start, m_x_span, m_bin_count,
      m_axis == AxisKind::Time ? "time" : "step", attributes);
  // Y grid and labels (bytes), then the frame.
  const double step = byte_step(m_y_max_bytes * 0.999);
  for (double v = 0; v <= m_y_max_bytes + 1; v += step) {
    const double y = l.top_px + y_of(v);
    out += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" class=\"grid\"/>"
        "<text x=\"{}\" y=\"{}\" class=\"ylabel\">{}</text>\n",
        l.left_px, l.width_px - l.right_px, y, y, l.left_px - 6, y + 4,
        format_bytes(static_cast<uint64_t>(v)));
  }
  // X labels: the script redraws them on zoom; these are the unzoomed ones.
  out += fmt::format("<g class=\"xaxis\" transform=\"translate({},{})\">", l.left_px,
                     l.top_px + l.plot_height_px());
  const double x_step = m_axis == AxisKind::Time ? nice_step(m_x_span / 1e9) * 1e9
                                                 : std::max(1.0, std::round(nice_step(m_x_span)));
  for (double x = 0; x <= m_x_span; x += x_step) {
    const double px = x / m_x_span * l.plot_width_px();
    const std::string label = m_axis == AxisKind::Time
                                  ? format_duration_ns(static_cast<int64_t>(x))
                                  : fmt::format("{}", static_cast<uint64_t>(m_x_start + x));
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"0\" y2=\"4\" class=\"tick\"/>"
        "<text x=\"{:.1f}\" y=\"17\" class=\"xlabel\">{}</text>",
        px, px, px, label);
  }
  out += "</g>\n";
  out += fmt::format(
      "<svg class=\"plot\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "preserveAspectRatio=\"none\">\n<rect class=\"plotbg\" x=\"0\" y=\"0\" width=\"{}\" "
      "height=\"{}\"/>\n{}</svg>\n",
      l.left_px, l.top_px, l.plot_width_px(), l.plot_height_px(), m_bin_count, l.plot_height_px(),
      m_bin_count, l.plot_height_px(), m_plot);
  out += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\n",
                     l.left_px, l.top_px, l.plot_width_px(), l.plot_height_px());
  return out + "</svg>";
}

}  // namespace vramscope::report
