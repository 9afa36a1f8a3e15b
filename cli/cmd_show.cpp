// cli/cmd_show.cpp -- `vramscope show FILE`: summary of a recording (needs no GPU)
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "commands.hpp"
#include "file_args.hpp"
#include "output.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

struct ShowOptions {
  std::string path;
  bool json = false;
  /// Accepted for scripts written for earlier versions, which took peaks from the index's
  /// digests without it: every sample is always read now.
  bool scan = false;
};

int run_show(const ShowOptions& options) {
  report::RecordingSummary summary;
  report::RecordingTail tail;
  RecordingMetadata metadata;
  try {
    const std::unique_ptr<RecordingReader> reader = RecordingReader::open(options.path);
    metadata = reader->metadata();
    // Every sample is read and folded in: the index's digests could only be trusted, not
    // checked, without reading the samples, which is most of the work.
    summary = report::summarise_recording(*reader, tail);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The reader validates what it reads; anything else it throws is still a bad file to us.
    throw Error(options.path + ": cannot read recording: " + e.what());
  }

  if (tail.state != TailState::Clean) {
    std::fprintf(stderr, "vramscope: warning: %s: recording is %s: %s\n", options.path.c_str(),
                 report::tail_state_name(tail.state), tail.message.c_str());
  }
  const std::string text =
      options.json ? report::format_summary_json(options.path, metadata, summary, tail) + "\n"
                   : report::format_summary_text(options.path, metadata, summary, tail);
  write_stdout(text);
  return ExitOk;
}

}  // namespace

Command add_show_command(CLI::App& app) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* show = app.add_subcommand(
      "show",
      "Summarise a recording: time span, sample count, how the file ended, each GPU's peak "
      "used memory and when, and per-process peaks (driver used; PyTorch allocated/reserved "
      "and step peaks when an agent published; at a process's used peak, its non-PyTorch bytes "
      "named: CUDA context, other libraries, NCCL, private pools, from the agent's settled "
      "pairing). Works without a GPU.");
  show->add_option("file", options->path, "Recording made by `vramscope record`")
      ->required()
      ->check(readable_file());
  show->add_flag("--json", options->json, "Print the summary as JSON (byte counts as integers)");
  show->add_flag("--scan", options->scan,
                 "Read every sample (what `show` always does; accepted for older scripts)");
  return Command{show, [options] { return run_show(*options); }};
}

}  // namespace vramscope::cli
