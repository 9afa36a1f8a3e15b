// tests/cpp/report/test_html_report.cpp -- the report page: self-contained, escaped, show's numbers
#include <gtest/gtest.h>

#include <regex>

#include "report/sample_fixtures.hpp"
#include "vramscope/report/html_report.hpp"

namespace vramscope::report {
namespace {

using testing::make_two_gpu_sample;
using testing::mib;

/// `polling`: pid 4021's agent polls (its torch and step peaks sampled).
std::string page_of(const std::string& command, bool polling = false) {
  RunProfile run;
  run.path = "run.vsrec";
  run.metadata.command = command;
  StepPeakCollector steps;
  TimelineCollector timeline(200, 100'000'000);
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[0].command = command;
  s.allocators[0].polling_only = polling;
  for (int i = 0; i < 50; ++i) {
    // The trainer's agent ends a step every sample (its polled previous-step peaks).
    s.allocators[0].step = static_cast<uint64_t>(i + 1);
    s.allocators[0].step_peak_allocated_bytes = (20000 + static_cast<uint64_t>(i)) * mib;
    s.allocators[0].step_peak_reserved_bytes = 24576 * mib;
    run.summary.add(s);
    steps.add(s);
    timeline.add(s);
    s.timestamp_ns += 100'000'000;
  }
  run.steps = steps.processes();
  return format_html_report(run, timeline.finish());
}

TEST(HtmlReport, FetchesNothingAndRunsOnlyItsOwnScript) {
  const std::string page = page_of("python train.py");
  // The only URL is the SVG namespace; no src= or <link>: nothing is fetched when it opens.
  const std::regex url("https?://[^\"' ]*");
  for (auto it = std::sregex_iterator(page.begin(), page.end(), url); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ(it->str(), "http://www.w3.org/2000/svg");
  }
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
}

TEST(HtmlReport, HostileCommandLinesStayText) {
  const std::string page = page_of("</script><script>alert(1)</script><img onerror=x>");
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);
  // Inside the embedded JSON < and > are JSON escapes, so the element cannot end early.
  EXPECT_NE(page.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
}

TEST(HtmlReport, TablesCarryShowsExactNumbers) {
  const std::string page = page_of("python train.py");
  const SystemSample s = make_two_gpu_sample();
  EXPECT_NE(page.find("data-field=\"peak_used_bytes\" data-bytes=\"" +
                      std::to_string(*s.devices[0].used_bytes) + "\""),
            std::string::npos);
  EXPECT_NE(page.find("data-field=\"torch_peak_reserved_bytes\" data-bytes=\"" +
                      std::to_string(24576 * mib) + "\""),
            std::string::npos);
  EXPECT_NE(page.find("<option value=\"0\">GPU 0 · pid 4021</option>"), std::string::npos);
  EXPECT_NE(page.find("data-chart=\"gpu-1\""), std::string::npos);
}

TEST(HtmlReport, SampledPeaksAreMarkedAtLeast) {
  const std::string exact = page_of("python train.py");
  EXPECT_EQ(exact.find("data-sampled"), std::string::npos);
  const std::string page = page_of("python train.py", true);
  EXPECT_NE(page.find("data-field=\"torch_peak_reserved_bytes\" data-bytes=\"" +
                      std::to_string(24576 * mib) + "\" data-sampled=\"true\""),
            std::string::npos);
  EXPECT_NE(page.find(">≥24576MiB</td>"), std::string::npos);
  EXPECT_NE(page.find("data-field=\"max_step_peak_allocated_bytes\""), std::string::npos);
  EXPECT_NE(page.find("<span class=\"sampled\" data-sampled=\"true\">: at least these"),
            std::string::npos);
}

}  // namespace
}  // namespace vramscope::report
