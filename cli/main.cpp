// cli/main.cpp -- entry point of `vramscope`: parse, dispatch to one command, map errors to exit codes
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vramscope/status.hpp"
#include "vramscope/version.hpp"

namespace {

/// The deepest subcommand that was being parsed when CLI11 stopped (the root app if none).
const CLI::App& parsed_command(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return parsed_command(*sub);
  return app;
}

/// "vramscope show" for a subcommand, "vramscope" for the root: where `--help` helps.
std::string command_path(const CLI::App& command) {
  std::string path;
  for (const CLI::App* a = &command; a != nullptr; a = a->get_parent()) {
    path = path.empty() ? a->get_name() : a->get_name() + " " + path;
  }
  return path;
}

/// A CLI11 parse error in vramscope's words: one line starting "vramscope: ", naming the
/// command whose --help explains it; an unknown word where a command is expected lists the
/// commands. Returns the exit code (2: usage).
int report_usage_error(const CLI::App& app, const CLI::ParseError& e) {
  const CLI::App& command = parsed_command(app);
  const std::string help = command_path(command) + " --help";
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    const std::vector<std::string> extras = command.remaining();
    const std::string first = extras.empty() ? std::string() : extras.front();
    if (&command == &app && !first.empty() && first[0] != '-') {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      std::fprintf(stderr,
                   "vramscope: unknown command '%s'; the commands are %s (vramscope --help)\n",
                   first.c_str(), names.c_str());
    } else {
      std::fprintf(stderr, "vramscope: unexpected argument '%s' (%s)\n", first.c_str(),
                   help.c_str());
    }
    return vramscope::ExitUsage;
  }
  std::string what = e.what();
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && what.size() > 12 &&
      what.compare(what.size() - 12, 12, " is required") == 0) {
    what = "missing " + what.substr(0, what.size() - 12);
  }
  // CLI11's "Could not convert: --count = abc".
  const std::string convert = "Could not convert: ";
  if (what.rfind(convert, 0) == 0 && what.find(" = ") != std::string::npos) {
    const std::size_t eq = what.find(" = ");
    what = what.substr(convert.size(), eq - convert.size()) + ": cannot read '" +
           what.substr(eq + 3) + "'";
  }
  const std::string prefix = &command == &app ? "" : command.get_name() + ": ";
  std::fprintf(stderr, "vramscope: %s%s (%s)\n", prefix.c_str(), what.c_str(), help.c_str());
  return vramscope::ExitUsage;
}

int run(int argc, char** argv) {
  using namespace vramscope;
  CLI::App app{
      "vramscope: what is using GPU memory, right now, and why.\n"
      "With no subcommand, prints every GPU and its processes (like nvidia-smi -q -d MEMORY).\n"
      "Exit codes: 0 ok, 1 error, 2 usage error, 3 no NVIDIA driver or no GPU, 4 a requested check "
      "failed.",
      "vramscope"};
  app.set_version_flag("--version", std::string("vramscope ") + version);
  app.require_subcommand(0, 1);
  app.footer(
      "Environment: VRAMSCOPE_NVML_LIBRARY=/path/libnvidia-ml.so loads that NVML library; "
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
  commands.push_back(cli::add_fit_command(app));
  commands.push_back(cli::add_export_command(app));
  commands.push_back(cli::add_exporter_command(app));

  // `fit` hands its whole command line, `--` and --help included, to Python.
  if (argc >= 2 && std::string(argv[1]) == "fit") {
    return cli::run_fit(std::vector<std::string>(argv + 2, argv + argc));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_usage_error(app, e);
  } catch (const Error& e) {
    // A check of ours that failed while parsing (file_args.hpp: a missing input file, exit 1).
    std::fprintf(stderr, "vramscope: %s\n", e.what());
    return e.exit_code();
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

}  // namespace

int main(int argc, char** argv) {
  // Declaring the commands can throw too (an allocation, CLI11 refusing an option); whatever
  // escapes run() still ends as one line and exit 1, never as std::terminate's abort.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vramscope: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "vramscope: internal error\n");
  }
  return vramscope::ExitError;
}
