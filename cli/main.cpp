// cli/main.cpp -- entry point of `vramscope`: parse, dispatch to one command, map errors to exit codes
#include <cstdio>
#include <exception>
#include <vector>

#include "commands.hpp"
#include "vramscope/status.hpp"
#include "vramscope/version.hpp"

int main(int argc, char** argv) {
  using namespace vramscope;
  CLI::App app{
      "vramscope: what is using GPU memory, right now, and why.\n"
      "With no subcommand, prints every GPU and its processes (like nvidia-smi -q -d MEMORY).\n"
      "Exit codes: 0 ok, 1 error, 2 usage error, 3 no NVIDIA driver or no GPU, 4 a requested check failed.",
      "vramscope"};
  app.set_version_flag("--version", std::string("vramscope ") + version);
  app.require_subcommand(0, 1);
  app.footer("Environment: VRAMSCOPE_NVML_LIBRARY=/path/libnvidia-ml.so loads that NVML library; "
             "NO_COLOR disables colour.\nRun `vramscope COMMAND --help` for a command's options.");

  std::vector<cli::Command> commands;
  commands.push_back(cli::add_snapshot_command(app));
  commands.push_back(cli::add_watch_command(app));
  commands.push_back(cli::add_record_command(app));
  commands.push_back(cli::add_show_command(app));
  commands.push_back(cli::add_diff_command(app));
  commands.push_back(cli::add_report_command(app));
  commands.push_back(cli::add_top_command(app));
  commands.push_back(cli::add_run_command(app));
  commands.push_back(cli::add_export_command(app));
  commands.push_back(cli::add_exporter_command(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? ExitOk : ExitUsage;
  }

  try {
    // The root command (snapshot) runs only when no subcommand was given.
    for (std::size_t i = 1; i < commands.size(); ++i) {
      if (commands[i].app->parsed()) return commands[i].run();
    }
    return commands.front().run();
  } catch (const Error& e) {
    std::fprintf(stderr, "vramscope: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vramscope: internal error: %s\n", e.what());
    return ExitError;
  }
}
