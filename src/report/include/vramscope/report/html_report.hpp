// src/report/include/vramscope/report/html_report.hpp -- `vramscope report`: one self-contained HTML page of a recording
//
// The page is built entirely here: charts are inline SVG (svg_chart.hpp), styles and a small
// script of our own are inline, and nothing is fetched when it opens, so it works offline, from
// an e-mail attachment or a CI artifact. Its size depends on the chart width, not on the
// recording's length (timeline.hpp bins every series).
#pragma once

#include <cstddef>
#include <string>

#include "vramscope/report/run_profile.hpp"
#include "vramscope/report/timeline.hpp"

namespace vramscope::report {

/// How the page is drawn.
struct HtmlReportOptions {
  /// Bins per timeline and per step chart (about one per pixel of plot width).
  std::size_t bins = 1000;
};

/// The whole page. `profile` gives the numbers `show` prints (also embedded as its JSON),
/// `timeline` the binned series of the same recording.
std::string format_html_report(const RunProfile& profile, const Timeline& timeline,
                               const HtmlReportOptions& options = {});

/// The page's stylesheet and script (html_assets.cpp).
const char* html_report_style();
const char* html_report_script();

}  // namespace vramscope::report
