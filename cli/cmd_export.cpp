// cli/cmd_export.cpp -- `vramscope export FILE`: a recording to TensorBoard, Chrome trace, CSV, JSONL
//
// The recording is read once and every requested sink receives each sample, so several formats
// cost one pass. A torn or corrupt tail (recorder killed) is a warning: what was read is exported.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "file_args.hpp"
#include "validators.hpp"
#include "vramscope/exporters/chrome_trace.hpp"
#include "vramscope/exporters/tensorboard.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/row_files.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {

namespace {

struct ExportOptions {
  std::string input;
  std::string tensorboard_dir;
  std::string trace_path;
  std::string csv_path;
  std::string csv_processes_path;
  std::string csv_steps_path;
  std::string jsonl_path;
  uint64_t max_events = exporters::ChromeTraceOptions{}.max_events;
  bool force = false;
};

/// `vramscope export FILE`: every requested sink receives each sample of one pass.
int run_export(const ExportOptions& options) {
  if (options.tensorboard_dir.empty() && options.trace_path.empty() && options.csv_path.empty() &&
      options.csv_processes_path.empty() && options.csv_steps_path.empty() &&
      options.jsonl_path.empty()) {
    throw Error(
        "export: give at least one output (--tensorboard DIR, --trace FILE, --csv FILE, "
        "--csv-processes FILE, "
        "--csv-steps FILE, --jsonl FILE)",
        ExitUsage);
  }
  if (!options.force) {
    for (const std::string* path :
         {&options.trace_path, &options.csv_path, &options.csv_processes_path,
          &options.csv_steps_path, &options.jsonl_path}) {
      if (!path->empty() && ::access(path->c_str(), F_OK) == 0) {
        throw Error(*path + " already exists (pass --force to overwrite it)");
      }
    }
  }
  auto reader = RecordingReader::open(options.input);

  std::vector<std::unique_ptr<exporters::Sink>> sinks;
  std::vector<std::string> outputs;
  exporters::TensorBoardWriter* tensorboard = nullptr;
  exporters::ChromeTraceWriter* trace = nullptr;
  if (!options.tensorboard_dir.empty()) {
    auto writer = std::make_unique<exporters::TensorBoardWriter>(options.tensorboard_dir);
    tensorboard = writer.get();
    sinks.push_back(std::move(writer));
  }
  if (!options.trace_path.empty()) {
    exporters::ChromeTraceOptions trace_options;
    trace_options.max_events = options.max_events;
    trace_options.overwrite = options.force;
    auto writer = std::make_unique<exporters::ChromeTraceWriter>(options.trace_path, trace_options);
    trace = writer.get();
    sinks.push_back(std::move(writer));
  }
  if (!options.csv_path.empty()) {
    sinks.push_back(std::make_unique<report::CsvFileSink>(options.csv_path,
                                                          report::CsvRows::Devices, options.force));
    outputs.push_back(options.csv_path);
  }
  if (!options.csv_processes_path.empty()) {
    sinks.push_back(std::make_unique<report::CsvFileSink>(
        options.csv_processes_path, report::CsvRows::Processes, options.force));
    outputs.push_back(options.csv_processes_path);
  }
  if (!options.csv_steps_path.empty()) {
    sinks.push_back(std::make_unique<report::CsvFileSink>(options.csv_steps_path,
                                                          report::CsvRows::Steps, options.force));
    outputs.push_back(options.csv_steps_path);
  }
  if (!options.jsonl_path.empty()) {
    sinks.push_back(std::make_unique<report::JsonlFileSink>(options.jsonl_path, options.force));
    outputs.push_back(options.jsonl_path);
  }

  uint64_t samples = 0;
  SystemSample sample;
  while (reader->next(sample)) {
    for (auto& sink : sinks) sink->write(sample);
    ++samples;
  }
  if (reader->tail_state() != TailState::Clean) {
    std::fprintf(stderr, "vramscope: warning: %s: %s; exported the %llu samples before it\n",
                 options.input.c_str(), reader->tail_message().c_str(),
                 static_cast<unsigned long long>(samples));
  }
  if (tensorboard != nullptr) {
    tensorboard->close();
    outputs.insert(outputs.begin(), tensorboard->path());
  }
  if (trace != nullptr) {
    trace->close();
    std::string note =
        options.trace_path + " (" + std::to_string(trace->events_written()) + " events";
    if (trace->events_dropped() > 0) {
      note += ", " + std::to_string(trace->events_dropped()) + " dropped by --max-events";
    }
    outputs.push_back(note + ")");
  }
  for (auto& sink : sinks) sink->flush();
  std::fprintf(stderr, "exported %llu samples to:\n", static_cast<unsigned long long>(samples));
  for (const std::string& output : outputs) std::fprintf(stderr, "  %s\n", output.c_str());
  return ExitOk;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "export", "Convert a recording to TensorBoard, Chrome/Perfetto trace, CSV or JSON lines.");
  sub->footer(
      "Give one or more outputs; the recording is read once.\n"
      "  vramscope export run.vsrec --tensorboard runs/mem      then: tensorboard --logdir runs\n"
      "  vramscope export run.vsrec --trace mem.json            open in https://ui.perfetto.dev or "
      "chrome://tracing\n"
      "  vramscope export run.vsrec --csv gpus.csv --csv-processes procs.csv --csv-steps steps.csv "
      "--jsonl samples.jsonl\n"
      "TensorBoard tags: driver/gpuN/{used,free,reserved,total}_bytes and\n"
      "memory/{rankR|pidP}/cudaD/{allocated,reserved,...,step_peak_*}_bytes and, for processes "
      "that\n"
      "track categories, memory/{rankR|pidP}/cudaD/category/<name>_bytes (docs/tensorboard.md).");
  auto options = std::make_shared<ExportOptions>();
  sub->add_option("FILE", options->input, "Recording made by `vramscope record`")
      ->required()
      ->check(readable_file());
  sub->add_option("--tensorboard", options->tensorboard_dir,
                  "Write a TensorBoard event file into this run directory (created 0700)");
  sub->add_option("--trace", options->trace_path,
                  "Write a Chrome/Perfetto JSON trace to this file");
  sub->add_option("--max-events", options->max_events,
                  "Upper bound on trace counter/step events (keeps files well under 500 MB)")
      ->capture_default_str()
      ->check(count_number())
      ->check(CLI::PositiveNumber);
  sub->add_option("--csv", options->csv_path, "Write one CSV row per device per sample");
  sub->add_option("--csv-processes", options->csv_processes_path,
                  "Write one CSV row per process per sample");
  sub->add_option("--csv-steps", options->csv_steps_path,
                  "Write one CSV row per training step (peaks and per-category bytes)");
  sub->add_option("--jsonl", options->jsonl_path,
                  "Write one JSON document (the --json schema) per sample per line");
  sub->add_flag("--force", options->force, "Overwrite existing output files");

  return Command{sub, [options] { return run_export(*options); }};
}

}  // namespace vramscope::cli
