// cli/cmd_watch.cpp -- `vramscope watch`: one sample per interval on stdout, flushed per record
#include <memory>
#include <string>

#include "commands.hpp"
#include "output.hpp"
#include "pacing.hpp"
#include "stop_signals.hpp"
#include "validators.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/report/csv_report.hpp"
#include "vramscope/report/json_report.hpp"
#include "vramscope/report/watch_line.hpp"
#include "vramscope/sampler.hpp"

namespace vramscope::cli {
namespace {

struct WatchOptions {
  std::string interval = "1s";
  uint64_t count = 0;
  std::string format = "table";
  std::string units = "mib";
  bool processes = false;
  bool no_agents = false;
};

/// The text of one sample in the chosen format.
std::string render(const WatchOptions& options, const SystemSample& sample) {
  if (options.format == "jsonl") return report::format_sample_json(sample, false) + "\n";
  if (options.format == "csv") {
    return report::csv_rows(
        sample, options.processes ? report::CsvRows::Processes : report::CsvRows::Devices);
  }
  return report::format_watch_lines(
      sample, options.units == "human" ? report::UnitStyle::Human : report::UnitStyle::Mib);
}

int run_watch(const WatchOptions& options) {
  const int64_t interval_ns = parse_interval_ns("--interval", options.interval);
  if (options.processes && options.format != "csv") {
    throw Error("--processes applies to --format csv only", ExitUsage);
  }
  install_stop_handlers();
  SamplerOptions sampler_options;
  sampler_options.read_agents = !options.no_agents;
  sampler_options.on_warning = warn_stderr;
  const std::unique_ptr<Sampler> sampler = open_sampler(sampler_options);

  if (options.format == "csv") {
    const auto rows = options.processes ? report::CsvRows::Processes : report::CsvRows::Devices;
    if (!write_stdout(report::csv_header(rows))) return ExitOk;
  }
  SystemSample sample;
  const int64_t start_ns = monotonic_ns();
  for (uint64_t taken = 0; options.count == 0 || taken < options.count; ++taken) {
    if (stop_requested()) break;
    sampler->sample(sample);
    // A reader that went away (EPIPE) ends the stream normally: `watch | head -3` is not an error.
    if (!write_stdout(render(options, sample))) return ExitOk;
    if (options.count != 0 && taken + 1 == options.count) break;
    sleep_until_ns(next_deadline_ns(start_ns, interval_ns, monotonic_ns()));
  }
  return ExitOk;
}

}  // namespace

Command add_watch_command(CLI::App& app) {
  auto options = std::make_shared<WatchOptions>();
  CLI::App* watch = app.add_subcommand(
      "watch",
      "Print a sample of every GPU at a fixed interval until Ctrl-C (or --count). Each record is "
      "flushed at once, so it pipes into other tools; the cadence follows absolute deadlines and "
      "does not drift.");
  watch
      ->add_option("-i,--interval", options->interval,
                   "Time between samples: 10ms, 0.5s, 2 (seconds), 1m; 1ms to 24h")
      ->capture_default_str();
  watch->add_option("-n,--count", options->count, "Stop after N samples (0: until Ctrl-C)")
      ->check(count_number())
      ->capture_default_str();
  watch
      ->add_option("-f,--format", options->format,
                   "table: one line per GPU per sample; csv: a header, then rows as `vramscope "
                   "--csv`; jsonl: one `vramscope --json` document per line")
      ->check(CLI::IsMember({"table", "csv", "jsonl"}))
      ->capture_default_str();
  watch->add_option("--units", options->units, "table units: mib (as nvidia-smi) or human")
      ->check(CLI::IsMember({"mib", "human"}))
      ->capture_default_str();
  watch->add_flag("--processes", options->processes,
                  "With --format csv: one row per process instead of per GPU");
  watch->add_flag("--no-agents", options->no_agents,
                  "Driver view only; do not read PyTorch agents' shared memory");
  return Command{watch, [options] { return run_watch(*options); }};
}

}  // namespace vramscope::cli
