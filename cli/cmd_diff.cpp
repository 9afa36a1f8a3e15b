// cli/cmd_diff.cpp -- `vramscope diff A B`: two recordings' peaks side by side (needs no GPU)
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "file_args.hpp"
#include "output.hpp"
#include "vramscope/report/run_diff.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

struct DiffOptions {
  std::string a_path;
  std::string b_path;
  bool json = false;
  /// --fail-if-peak-grows as given ("5%"); empty when not given.
  std::string fail_if_peak_grows;
};

void warn_tail(const report::RunProfile& run) {
  if (run.tail.state == TailState::Clean) return;
  std::fprintf(stderr, "vramscope: warning: %s: recording is %s: %s\n", run.path.c_str(),
               report::tail_state_name(run.tail.state), run.tail.message.c_str());
}

int run_diff(const DiffOptions& options) {
  std::optional<double> threshold;
  if (!options.fail_if_peak_grows.empty()) {
    threshold = report::parse_percent(options.fail_if_peak_grows);
    if (!threshold) {
      throw Error("--fail-if-peak-grows: expected a percentage such as 5% (got \"" +
                      options.fail_if_peak_grows + "\")",
                  ExitUsage);
    }
  }
  const report::RunProfile a = report::load_run_profile(options.a_path);
  const report::RunProfile b = report::load_run_profile(options.b_path);
  warn_tail(a);
  warn_tail(b);
  const report::RunDiff diff = report::compare_runs(a, b);
  const std::vector<std::string> grown =
      threshold ? report::peaks_grown(diff, *threshold) : std::vector<std::string>{};
  write_stdout(options.json ? report::format_diff_json(a, b, diff, threshold, grown) + "\n"
                            : report::format_diff_text(a, b, diff, threshold, grown));
  return grown.empty() ? ExitOk : ExitCheckFailed;
}

}  // namespace

Command add_diff_command(CLI::App& app) {
  auto options = std::make_shared<DiffOptions>();
  CLI::App* diff = app.add_subcommand(
      "diff",
      "Compare two recordings (A the baseline, B the new run): per GPU and process the peak "
      "used, PyTorch allocated/reserved, the non-PyTorch bytes at the used peak (context, "
      "other), the step-peak distribution (median, p99, max) and the categories at the peak "
      "step, with deltas. Processes are matched by GPU and rank, then "
      "command line, then order. Works without a GPU.");
  diff->add_option("a", options->a_path, "Baseline recording")->required()->check(readable_file());
  diff->add_option("b", options->b_path, "Recording to compare with it")
      ->required()
      ->check(readable_file());
  diff->add_flag("--json", options->json, "Print the comparison as JSON (byte counts as integers)");
  diff->add_option("--fail-if-peak-grows", options->fail_if_peak_grows,
                   "Exit with status 4 when any peak (GPU used; process used, torch allocated, "
                   "torch reserved, max step peak) grew from A to B by more than this, e.g. 5%");
  return Command{diff, [options] { return run_diff(*options); }};
}

}  // namespace vramscope::cli
