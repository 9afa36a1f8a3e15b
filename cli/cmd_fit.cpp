// cli/cmd_fit.cpp -- `vramscope fit [opts] -- python train.py --batch-size {}`: the batch that fits
//
// The search runs probes in fresh Python processes under the agent and fits the memory model in
// Python (vramscope.predict), so this command only finds the interpreter and replaces itself with
// `python -m vramscope.predict ARGS` (exec: signals, the exit code and the terminal stay the
// program's). Its options, and --help, are Python's: one place teaches them and checks them
// (exit 2) before any probe runs.
#include <string>
#include <vector>

#include "commands.hpp"
#include "python_exec.hpp"

namespace vramscope::cli {

int run_fit(const std::vector<std::string>& rest) {
  std::vector<std::string> argv{python_interpreter(), "-m", "vramscope.predict"};
  argv.insert(argv.end(), rest.begin(), rest.end());
  exec_python("fit", argv);
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
