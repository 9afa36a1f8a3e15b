// cli/cmd_report.cpp -- `vramscope report FILE -o run.html`: one self-contained HTML page (needs no
// GPU)
#include <cstdio>
#include <memory>
#include <string>

#include "atomic_file.hpp"
#include "commands.hpp"
#include "file_args.hpp"
#include "vramscope/report/html_report.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

struct ReportOptions {
  std::string path;
  std::string output;
  bool force = false;
  std::size_t bins = 1000;
};

int run_report(const ReportOptions& options) {
  report::RunProfile profile;
  // The interval is known only once the header is read: the collector is made on first use.
  std::unique_ptr<report::TimelineCollector> timeline;
  profile = report::load_run_profile(
      options.path, [&](const SystemSample& sample, const JoinResult& joined) {
        if (!timeline) timeline = std::make_unique<report::TimelineCollector>(options.bins, 0);
        timeline->add(sample, joined);
      });
  if (!timeline) timeline = std::make_unique<report::TimelineCollector>(options.bins, 0);
  if (profile.tail.state != TailState::Clean) {
    std::fprintf(stderr, "vramscope: warning: %s: recording is %s: %s\n", options.path.c_str(),
                 report::tail_state_name(profile.tail.state), profile.tail.message.c_str());
  }
  report::HtmlReportOptions html;
  html.bins = options.bins;
  write_file_atomically(
      options.output, report::format_html_report(profile, timeline->finish(), html), options.force);
  return ExitOk;
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto options = std::make_shared<ReportOptions>();
  CLI::App* report = app.add_subcommand(
      "report",
      "Write one self-contained HTML page of a recording (opens offline, no scripts fetched): per "
      "GPU a timeline with per-process stacking, per process its driver use split into PyTorch "
      "allocated, cached free and non-PyTorch, step peaks, the categories at the highest step, "
      "OOMs and the numbers of `show`. Long recordings are binned keeping every peak. Works "
      "without a GPU.");
  report->add_option("file", options->path, "Recording made by `vramscope record`")
      ->required()
      ->check(readable_file());
  report->add_option("-o,--output", options->output, "HTML file to write (created 0600)")
      ->required();
  report->add_flag("--force", options->force, "Replace the output file if it exists");
  report
      ->add_option("--bins", options->bins,
                   "Points per chart: each keeps the maximum of the samples it covers")
      ->check(CLI::Range(50, 20000))
      ->capture_default_str();
  return Command{report, [options] { return run_report(*options); }};
}

}  // namespace vramscope::cli
