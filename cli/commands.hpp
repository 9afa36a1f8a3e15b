// cli/commands.hpp -- every subcommand of `vramscope`, listed once; main.cpp wires them to CLI11
//
// Each command lives in its own cmd_<name>.cpp and exposes one add_<name>_command() that declares
// its options on a CLI11 subcommand and returns how to run it once parsing succeeded. Commands
// return an exit code (see vramscope/status.hpp) or throw vramscope::Error.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace vramscope::cli {

/// A parsed command ready to run: the CLI11 (sub)app it belongs to and its body.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// `vramscope` with no subcommand: the one-shot table (--json, --csv). Declares options on `app`.
Command add_snapshot_command(CLI::App& app);
/// `vramscope watch`: streaming samples.
Command add_watch_command(CLI::App& app);
/// `vramscope record -o FILE [-- CMD...]`: crash-safe recording.
Command add_record_command(CLI::App& app);
/// `vramscope show FILE`: summary of a recording.
Command add_show_command(CLI::App& app);
/// `vramscope diff A B`: two recordings' peaks side by side (--fail-if-peak-grows for CI).
Command add_diff_command(CLI::App& app);
/// `vramscope report FILE -o run.html`: one self-contained HTML page of a recording.
Command add_report_command(CLI::App& app);
/// `vramscope top`: live terminal view (or `--replay FILE`, or `--once` as text).
Command add_top_command(CLI::App& app);
/// `vramscope run [opts] script.py|-m module [args]`: run a Python program under the agent.
Command add_run_command(CLI::App& app);
/// `vramscope fit`: the largest batch that fits, by probes under the agent (cmd_fit.cpp).
Command add_fit_command(CLI::App& app);
/// Runs `python -m vramscope.predict rest...` (exec; returns only by throwing Error).
int run_fit(const std::vector<std::string>& rest);
/// `vramscope export FILE --tensorboard DIR --trace OUT --csv OUT --jsonl OUT`.
Command add_export_command(CLI::App& app);
/// `vramscope exporter [--listen HOST:PORT]`: Prometheus /metrics.
Command add_exporter_command(CLI::App& app);

}  // namespace vramscope::cli
