// cli/cmd_run.cpp -- `vramscope run [opts] script.py|-m module [args]`: Python under the agent
//
// The agent lives inside the Python process, so this command prepares the environment and runs
// `python -m vramscope.run ...`. Without --record it replaces itself with Python (exec, not
// fork: signals, the exit code and the terminal belong to the program as if started directly).
// With --record it runs the recording loop of `vramscope record` around Python as its command.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pacing.hpp"
#include "python_exec.hpp"
#include "record.hpp"
#include "run_python.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

struct RunOptions {
  std::string interval = "10ms";
  std::string record_path;
  bool force = false;
  bool quiet = false;
};

int run_python(const RunOptions& options, const std::vector<std::string>& program) {
  if (program.empty()) {
    throw Error(
        "run: missing the program: vramscope run [options] script.py [args] or "
        "vramscope run [options] -m module [args]",
        ExitUsage);
  }
  const int64_t interval_ns = parse_interval_ns("--interval", options.interval);
  const std::string python = python_interpreter();
  // The child inherits these; python -m vramscope.run reads them.
  ::setenv("VRAMSCOPE_RUN_INTERVAL_MS", format_interval_ms(interval_ns).c_str(), 1);
  if (options.quiet) ::setenv("VRAMSCOPE_RUN_QUIET", "1", 1);
  const std::vector<std::string> argv = python_run_argv(python, program);
  if (options.record_path.empty()) exec_python("run", argv);

  RecordOptions record;
  record.output = options.record_path;
  record.interval = options.interval;
  record.force = options.force;
  record.command = argv;
  return run_record(record);
}

/// CLI11's usage line of `run` says only "[OPTIONS]": the program comes after them in one of
/// two forms, which a second usage line in the footer would repeat.
class RunHelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string name) const override {
    return "Usage: " + name + " [OPTIONS] script.py [args...]\n       " + name +
           " [OPTIONS] -m module [args...]\n";
  }
};

}  // namespace

Command add_run_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "run", "Run a Python program with the allocator agent attached (no code change).");
  sub->formatter(std::make_shared<RunHelpFormatter>());
  sub->footer(
      "The agent attaches when the program initialises CUDA and publishes exact "
      "allocated/reserved/requested bytes for `vramscope` and `vramscope top`; every optimizer "
      "step closes a step; a summary (peaks, steps, OOMs) is printed to stderr at exit.\n"
      "Everything after the script or module goes to the program. With --record, the GPUs and "
      "the agent are recorded as by `vramscope record` until the program exits, and its exit "
      "status is returned.\n"
      "Environment: VRAMSCOPE_PYTHON=/path/python picks the interpreter (default: python3 beside "
      "this executable, else on PATH).\n"
      "Example: vramscope run --record train.vsrec train.py --epochs 3");
  auto options = std::make_shared<RunOptions>();
  sub->add_option("-i,--interval", options->interval,
                  "How often the agent publishes (and --record samples): 10ms, 0.5s, 2 (seconds)")
      ->capture_default_str();
  sub->add_option("-r,--record", options->record_path,
                  "Also record GPUs and agents into FILE (mode 0600) while the program runs");
  sub->add_flag("--force", options->force, "With --record: overwrite FILE if it exists");
  sub->add_flag("-q,--quiet", options->quiet, "Print no summary at exit");
  // Options end at the script or at -m: the rest is the program's, like `python` itself.
  sub->prefix_command();
  return Command{sub, [sub, options] { return run_python(*options, sub->remaining()); }};
}

}  // namespace vramscope::cli
