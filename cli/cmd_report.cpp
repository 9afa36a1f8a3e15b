// cli/cmd_report.cpp -- `vramscope report FILE -o run.html` (placeholder until the report lands)
#include <memory>
#include <string>

#include "commands.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {

Command add_report_command(CLI::App& app) {
  CLI::App* report = app.add_subcommand("report", "HTML report of a recording");
  report->group("");
  return Command{report, [] { return int(ExitError); }};
}

}  // namespace vramscope::cli
