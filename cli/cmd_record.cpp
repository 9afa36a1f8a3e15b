// cli/cmd_record.cpp -- `vramscope record -o FILE [-- CMD...]`: samples into a crash-safe recording
//
// Samples are appended at the interval and packed into checksummed chunks, each written and
// fdatasync'd before a sample would be taken a second after its first (record_chunk_window_ns),
// so a SIGKILL or a power loss loses at most the last second. With a command, the recorder runs it
// in its own process group, so a terminal's Ctrl-C reaches the command directly; the recorder notes
// the signal, keeps recording until the command exits and returns its exit status.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "pacing.hpp"
#include "record.hpp"
#include "rotation.hpp"
#include "stop_signals.hpp"
#include "validators.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/sampler.hpp"
#include "vramscope/units.hpp"
#include "vramscope/version.hpp"

namespace vramscope::cli {
namespace {

/// The status line is redrawn at most 4 times a second.
constexpr int64_t status_period_ns = 250'000'000;

/// "\r"-updated progress on stderr, only when stderr is a terminal.
class StatusLine {
 public:
  StatusLine() : m_enabled(isatty(STDERR_FILENO) == 1) {}
  void update(const RecordingWriter& writer, int64_t elapsed_ns, int64_t now_ns, bool force) {
    if (!m_enabled || (!force && now_ns - m_last_ns < status_period_ns)) return;
    m_last_ns = now_ns;
    std::fprintf(stderr, "\rrecording: %llu samples, %s, %s   ",
                 static_cast<unsigned long long>(writer.sample_count()),
                 format_bytes(writer.file_bytes()).c_str(), format_duration_ns(elapsed_ns).c_str());
    std::fflush(stderr);
    m_drawn = true;
  }
  void finish() {
    if (m_drawn) std::fputc('\n', stderr);
    m_drawn = false;
  }

 private:
  bool m_enabled;
  bool m_drawn = false;
  int64_t m_last_ns = 0;
};

/// A stop signal arrived while a command runs: Ctrl-C from the terminal already reached the
/// command; a signal sent to us alone (kill, a supervisor's SIGTERM) is passed on to it.
void relay_stop_signal(const ChildProcess& child) {
  if (g_stop_signal == 0) return;
  if (g_stop_from_kill != 0 || g_stop_signal == SIGTERM) child.send_signal(g_stop_signal);
  g_stop_signal = 0;
}

}  // namespace

int run_record(const RecordOptions& options) {
  const int64_t interval_ns = parse_interval_ns("--interval", options.interval);
  std::optional<int64_t> duration_ns;
  if (!options.duration.empty()) {
    duration_ns = parse_positive_duration_ns("--duration", options.duration);
  }
  std::optional<uint64_t> max_size_bytes;
  if (!options.max_size.empty()) {
    // parse_size_bytes forgives surrounding spaces; an option's value is taken as written.
    const bool is_trimmed = options.max_size.find_first_of(" \t") != 0 &&
                            options.max_size.find_last_of(" \t") != options.max_size.size() - 1;
    if (is_trimmed) max_size_bytes = parse_size_bytes(options.max_size);
    // Below 1 KiB every flush would start a new file (tests use the smallest).
    if (!max_size_bytes || *max_size_bytes < 1024U) {
      throw Error("--max-size: expected a size of at least 1KiB (1GiB, 500MB), got '" +
                      options.max_size + "'",
                  ExitUsage);
    }
  }
  // Said before anything starts; the writer refuses again (atomically) when it creates the file.
  if (!options.force && access(options.output.c_str(), F_OK) == 0) {
    throw Error(options.output + ": already exists (use --force to overwrite it)");
  }
  // Every argument is checked before the driver is: a wrong path is reported as such, also on a
  // machine without a GPU (where the sampler below would say "no NVIDIA driver" first).
  const std::size_t slash = options.output.rfind('/');
  const std::string folder = slash == std::string::npos ? "."
                             : slash == 0               ? "/"
                                                        : options.output.substr(0, slash);
  if (access(folder.c_str(), W_OK | X_OK) != 0) {
    throw Error(options.output + ": cannot create it (" + folder + ": " + errno_text(errno) + ")");
  }
  install_stop_handlers();
  SamplerOptions sampler_options;
  sampler_options.read_agents = !options.no_agents;
  sampler_options.on_warning = warn_stderr;
  const std::unique_ptr<Sampler> sampler = open_sampler(sampler_options);

  RecordingMetadata metadata;
  metadata.created_ns = wall_time_ns();
  metadata.interval_ns = interval_ns;
  metadata.hostname = sampler->hostname();
  metadata.driver_version = sampler->driver_version();
  metadata.command = shell_join(options.command);
  metadata.writer_version = version;
  // Created before the command starts, so "file exists" never leaves a command running.
  RecordingWriterOptions writer_options;
  writer_options.overwrite = options.force;
  // Each segment's summary goes into the index, so `show` of a weeks-long file reads no samples.
  writer_options.digest = std::make_shared<report::SummaryDigest>();
  std::unique_ptr<RecordingWriter> writer =
      RecordingWriter::create(options.output, metadata, writer_options);

  std::optional<ChildProcess> child;
  if (!options.command.empty()) {
    try {
      child = ChildProcess::spawn(options.command);
    } catch (const Error&) {
      // Nothing was recorded: leave no empty file behind.
      writer.reset();
      unlink(options.output.c_str());
      throw;
    }
  }

  StatusLine status;
  SystemSample sample;
  const int64_t start_ns = monotonic_ns();
  // When the open chunk's first sample was taken (none while no sample waits).
  std::optional<int64_t> chunk_start_ns;
  int result = ExitOk;
  try {
    for (;;) {
      int64_t now_ns = monotonic_ns();
      if (duration_ns && now_ns - start_ns >= *duration_ns) break;
      if (child) {
        relay_stop_signal(*child);
      } else if (stop_requested()) {
        break;
      }
      g_child_changed = 0;
      const bool child_done = child && child->poll_exited();
      // One last sample after the command exits shows what it left behind.
      if (!chunk_start_ns) chunk_start_ns = now_ns;
      sampler->sample(sample);
      writer->append(sample);
      now_ns = monotonic_ns();
      // Closed now if the next sample would fall a window or more after the chunk's first:
      // samples wait in memory less than record_chunk_window_ns (the last chunk is closed
      // with the file, whatever ends the recording).
      const int64_t next_ns = next_deadline_ns(start_ns, interval_ns, now_ns);
      if (next_ns - *chunk_start_ns >= record_chunk_window_ns) {
        writer->flush();
        chunk_start_ns.reset();
        if (max_size_bytes && writer->file_bytes() >= *max_size_bytes) {
          // Closed (with its index) before it is renamed: every rotated file is complete.
          writer->close();
          rotate_recordings(options.output, options.rotate);
          metadata.created_ns = wall_time_ns();
          writer_options.overwrite = false;
          writer_options.digest = std::make_shared<report::SummaryDigest>();
          writer = RecordingWriter::create(options.output, metadata, writer_options);
        }
      }
      status.update(*writer, now_ns - start_ns, now_ns, false);
      if (child_done) break;
      sleep_until_ns(next_deadline_ns(start_ns, interval_ns, monotonic_ns()));
    }
    writer->close();
  } catch (const Error& e) {
    status.finish();
    std::fprintf(stderr, "vramscope: recording stopped: %s\n", e.what());
    result = ExitError;
  }
  const int64_t end_ns = monotonic_ns();
  status.update(*writer, end_ns - start_ns, end_ns, true);
  status.finish();
  // Also off a terminal (where the status line is off), success is said, with what was kept.
  if (result == ExitOk) {
    std::fprintf(stderr, "vramscope: wrote %llu samples to %s\n",
                 static_cast<unsigned long long>(writer->sample_count()), options.output.c_str());
  }

  if (!child) return result;
  // --duration may end the recording first: the command still runs to its end. Its exit status
  // is what `record -- CMD` promises, even when the recording stopped early (a full disk is
  // said above on stderr; a trainer that succeeded must not look failed to its scheduler).
  while (!child->wait()) relay_stop_signal(*child);
  return child->exit_status().value_or(ExitError);
}

Command add_record_command(CLI::App& app) {
  auto options = std::make_shared<RecordOptions>();
  CLI::App* record = app.add_subcommand(
      "record",
      "Record samples of every GPU (and of PyTorch agents) into a crash-safe file until Ctrl-C, "
      "--duration, or the end of the command given after `--`. With a command, Ctrl-C goes to "
      "the command, recording continues until it exits, and its exit status is returned. Samples "
      "are packed into chunks of up to a second, each written and synced to disk before a sample "
      "a second after its first is taken: a crash or a power loss loses at most the last second.");
  record->add_option("-o,--output", options->output, "Recording file to create (mode 0600)")
      ->required();
  record
      ->add_option("-i,--interval", options->interval,
                   "Time between samples: 10ms, 0.5s, 2 (seconds); 1ms to 24h. Below 10ms the "
                   "driver's memory and process lists are read every 10ms and whenever an "
                   "agent's reserved bytes move, and repeated in between (--no-agents: every "
                   "sample)")
      ->capture_default_str();
  // Empty means "no limit" inside: given empty on the command line, it would record forever.
  record
      ->add_option("-d,--duration", options->duration,
                   "Stop recording after this long (30s, 5m); a command keeps running")
      ->check(non_empty());
  record->add_flag("--force", options->force, "Overwrite FILE if it exists");
  CLI::Option* max_size =
      record
          ->add_option("--max-size", options->max_size,
                       "When FILE reaches this size (1GiB, 500MB), close it, rotate it to FILE.1 "
                       "(FILE.1 to FILE.2, ...) and record on into a new FILE; for jobs that run "
                       "for weeks")
          ->check(non_empty());
  record
      ->add_option("--rotate", options->rotate,
                   "With --max-size: rotated files to keep (FILE.1 ... FILE.N); older ones are "
                   "removed")
      ->capture_default_str()
      ->check(CLI::Range(0U, 1000U))
      ->needs(max_size);
  record->add_flag("--no-agents", options->no_agents,
                   "Driver view only; do not read PyTorch agents' shared memory");
  record->add_option("command", options->command,
                     "Command to run and record, after `--` (e.g. -- python train.py)");
  record->footer("Example: vramscope record -o run.vsrec -- python train.py --epochs 3");
  return Command{record, [options] { return run_record(*options); }};
}

}  // namespace vramscope::cli
