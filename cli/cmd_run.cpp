// cli/cmd_run.cpp -- `vramscope run [opts] script.py|-m module [args]`: exec Python under the agent
//
// The agent lives inside the Python process, so this command only prepares the environment and
// replaces itself with `python -m vramscope.run ...` (exec, not fork: signals, the exit code and
// the terminal then belong to the program exactly as if it were started directly).
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "run_python.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

struct RunOptions {
  std::string interval = "10ms";
  bool quiet = false;
};

std::string self_exe_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

int exec_python(const RunOptions& options, const std::vector<std::string>& program) {
  if (program.empty()) {
    throw Error("run: missing the program: vramscope run [options] script.py [args] or "
                "vramscope run [options] -m module [args]",
                ExitUsage);
  }
  const auto interval_ms = parse_interval_ms(options.interval);
  if (!interval_ms) {
    throw Error("run: --interval must be a positive duration like 10ms or 0.5s, got '" +
                    options.interval + "'",
                ExitUsage);
  }
  const std::string python =
      find_python(std::getenv("VRAMSCOPE_PYTHON"), self_exe_path(),
                  [](const std::string& path) { return ::access(path.c_str(), X_OK) == 0; });
  ::setenv("VRAMSCOPE_RUN_INTERVAL_MS", format_interval_ms(*interval_ms).c_str(), 1);
  if (options.quiet) ::setenv("VRAMSCOPE_RUN_QUIET", "1", 1);

  const std::vector<std::string> args = python_run_argv(python, program);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  // Only reached when exec failed.
  throw Error("run: cannot start " + python + ": " + std::strerror(errno) +
              " (set VRAMSCOPE_PYTHON to the interpreter that has torch and vramscope)");
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "run", "Run a Python program with the allocator agent attached (no code change).");
  sub->footer(
      "Usage: vramscope run [--interval 10ms] [--quiet] script.py [args...]\n"
      "       vramscope run [--interval 10ms] [--quiet] -m module [args...]\n"
      "The agent attaches when the program initialises CUDA and publishes exact "
      "allocated/reserved/requested bytes for `vramscope` and `vramscope top`; every optimizer "
      "step closes a step; a summary (peaks, steps, OOMs) is printed to stderr at exit.\n"
      "Everything after the script or module goes to the program.\n"
      "Environment: VRAMSCOPE_PYTHON=/path/python picks the interpreter (default: python3 beside "
      "this executable, else on PATH).\n"
      "Example: vramscope run train.py --epochs 3");
  auto options = std::make_shared<RunOptions>();
  sub->add_option("--interval", options->interval,
                  "How often the agent publishes its numbers (e.g. 10ms, 0.5s)")
      ->capture_default_str();
  sub->add_flag("-q,--quiet", options->quiet, "Print no summary at exit");
  // Options end at the script or at -m: the rest is the program's, like `python` itself.
  sub->prefix_command();
  return Command{sub, [sub, options] { return exec_python(*options, sub->remaining()); }};
}

}  // namespace vramscope::cli
