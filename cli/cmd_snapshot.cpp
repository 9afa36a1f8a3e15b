// cli/cmd_snapshot.cpp -- `vramscope`: one look at every GPU and its processes (table, JSON, CSV)
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "commands.hpp"
#include "output.hpp"
#include "terminal.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/report/csv_report.hpp"
#include "vramscope/report/json_report.hpp"
#include "vramscope/report/table_report.hpp"
#include "vramscope/sampler.hpp"

namespace vramscope::cli {
namespace {

struct SnapshotOptions {
  bool json = false;
  bool csv = false;
  bool processes = false;
  std::string units = "mib";
  std::string color = "auto";
  bool no_agents = false;
};

int run_snapshot(const SnapshotOptions& options) {
  SamplerOptions sampler_options;
  sampler_options.read_agents = !options.no_agents;
  sampler_options.on_warning = warn_stderr;
  const std::unique_ptr<Sampler> sampler = open_sampler(sampler_options);
  SystemSample sample;
  sampler->sample(sample);

  std::string text;
  if (options.json) {
    text = report::format_sample_json(sample, true) + "\n";
  } else if (options.csv) {
    const auto rows = options.processes ? report::CsvRows::Processes : report::CsvRows::Devices;
    text = report::csv_header(rows) + report::csv_rows(sample, rows);
  } else {
    report::TableOptions table;
    table.units = options.units == "human" ? report::UnitStyle::Human : report::UnitStyle::Mib;
    table.color = use_color(parse_color_mode(options.color), STDOUT_FILENO);
    table.width_columns = terminal_columns(STDOUT_FILENO);
    text = report::format_sample_table(sample, table);
  }
  if (!write_stdout(text)) return ExitOk;

  // The report stands even when a GPU is lost; only "nothing could be read" is a failure.
  const bool all_lost =
      !sample.devices.empty() && std::all_of(sample.devices.begin(), sample.devices.end(),
                                             [](const DeviceSample& d) { return d.lost; });
  return all_lost ? ExitError : ExitOk;
}

}  // namespace

Command add_snapshot_command(CLI::App& app) {
  auto options = std::make_shared<SnapshotOptions>();
  auto* json = app.add_flag("--json", options->json,
                            "Print one JSON document (schema_version 1, see docs/json-schema.md): "
                            "byte counts as integers in keys ending _bytes, unsupported = null");
  auto* csv =
      app.add_flag("--csv", options->csv, "Print CSV (RFC 4180): a header and one row per GPU");
  json->excludes(csv);
  app.add_flag("--processes", options->processes,
               "With --csv: one row per process instead of per GPU")
      ->needs(csv);
  app.add_option("--units", options->units,
                 "Table units: mib (whole MiB rounded up, as nvidia-smi prints) or human "
                 "(GiB/MiB chosen per value)")
      ->check(CLI::IsMember({"mib", "human"}))
      ->capture_default_str();
  app.add_option("--color", options->color,
                 "Colour the table: auto (only on a terminal, not with NO_COLOR or TERM=dumb), "
                 "always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  app.add_flag("--no-agents", options->no_agents,
               "Show the driver's view only; do not read PyTorch agents' shared memory");
  return Command{&app, [options] { return run_snapshot(*options); }};
}

}  // namespace vramscope::cli
