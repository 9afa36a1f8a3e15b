// cli/cmd_fit.cpp -- `vramscope fit [opts] -- python train.py --batch-size {}`: the batch that fits
//
// The search runs probes in fresh Python processes under the agent and fits the memory model in
// Python (vramscope.predict), so this command only finds the interpreter and replaces itself with
// `python -m vramscope.predict ARGS` (exec: signals, the exit code and the terminal stay the
// program's). Its options, and --help, are Python's: one place teaches them.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "run_python.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

std::string self_exe_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

int run_fit(const std::vector<std::string>& rest) {
  const std::string python =
      find_python(std::getenv("VRAMSCOPE_PYTHON"), self_exe_path(),
                  [](const std::string& path) { return ::access(path.c_str(), X_OK) == 0; });
  std::vector<std::string> args{python, "-m", "vramscope.predict"};
  args.insert(args.end(), rest.begin(), rest.end());
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  throw Error("fit: cannot start " + python + ": " + errno_text(errno) +
              " (set VRAMSCOPE_PYTHON to the interpreter that has torch and vramscope)");
}

Command add_fit_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "fit", "Find the largest batch size that fits GPU memory, from a few small probe steps.");
  // Every argument, --help included, goes to `python -m vramscope.predict`, which documents
  // the options, the model and the budget in one place; main() hands them over before CLI11
  // parses (CLI11 would take a leading `--` for its own separator). This entry lists the
  // command in `vramscope --help`.
  sub->set_help_flag();
  sub->prefix_command();
  return Command{sub, [sub] { return run_fit(sub->remaining()); }};
}

}  // namespace vramscope::cli
