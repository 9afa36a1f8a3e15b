// tests/cpp/cli/test_cli_bounds.cpp -- every command that reads a recording stays within a fixed
// memory bound and a time limit on forged files, and `show` says what `show --scan` says
//
// The files are forged by format/forge_recording.hpp in the shapes of the hostile recordings
// that once cost gigabytes or minutes: a digest nested 200,000 deep, digests declaring 16 MiB,
// a sample naming a 64 KiB string 65,536 times, new pids in every sample (with 32 KiB commands
// for `export --trace`), 5,000 processes, one sample of 9 GPUs x 65,536 processes (`export
// --jsonl`, `top --replay`), a flood of index trailers, 100,000 one-sample segments, a flipped
// bit, two files end to end. Each
// command runs under a 1 GiB address-space limit (docs/security.md promises a fixed bound plus a
// small multiple of the file) and a CPU-time limit; a limit reached shows as a signal or a failure,
// not a pass.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "build_limits.hpp"
#include "cli_runner.hpp"
#include "format/forge_recording.hpp"
#include "format/memory_limit.hpp"
#include "vramscope/report/recording_summary.hpp"

namespace vramscope::testing {
namespace {

/// Address space and CPU seconds each command may use.
constexpr rlim_t command_address_space_bytes = 1ULL << 30U;
constexpr rlim_t command_cpu_seconds = 60;

/// Lowers this process's soft address-space and CPU limits for the commands it starts (a child
/// inherits them; exec gives it a fresh address space), restoring both on destruction.
class CommandLimits {
 public:
  CommandLimits() {
    ::getrlimit(RLIMIT_AS, &m_address_space);
    ::getrlimit(RLIMIT_CPU, &m_cpu);
    if (address_space_limit_works) {
      rlimit limit = m_address_space;
      limit.rlim_cur = command_address_space_bytes;
      ::setrlimit(RLIMIT_AS, &limit);
    }
    // This process's own CPU time counts against the same limit: leave it room.
    rusage used{};
    ::getrusage(RUSAGE_SELF, &used);
    rlimit cpu = m_cpu;
    cpu.rlim_cur =
        static_cast<rlim_t>(used.ru_utime.tv_sec + used.ru_stime.tv_sec) + command_cpu_seconds;
    ::setrlimit(RLIMIT_CPU, &cpu);
  }
  ~CommandLimits() {
    ::setrlimit(RLIMIT_AS, &m_address_space);
    ::setrlimit(RLIMIT_CPU, &m_cpu);
  }
  CommandLimits(const CommandLimits&) = delete;
  CommandLimits& operator=(const CommandLimits&) = delete;

 private:
  rlimit m_address_space{};
  rlimit m_cpu{};
};

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Runs `args` under CommandLimits.
CliResult run_limited(const TempDir& dir, const std::vector<std::string>& args) {
  const CommandLimits limits;
  return run_cli(dir, args);
}

/// Runs `args` within the limits: exit 0 (read) or 1 (refused), never killed.
void expect_bounded(const TempDir& dir, const std::vector<std::string>& args) {
  const CliResult r = run_limited(dir, args);
  // 1 only for a clear refusal (`top --replay` of a file without a valid sample), never for
  // memory running out (std::bad_alloc, reported as "cannot read recording: std::...").
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1)
      << args[0] << " " << args[1] << " " << args[2] << ": exit " << r.exit_code << "\n"
      << r.err.substr(0, 2000);
  EXPECT_EQ(r.err.find("std::"), std::string::npos)
      << args[0] << " " << args[1] << " " << args[2] << ": " << r.err.substr(0, 2000);
}

/// Every reader of recordings on `path`, each within the limits.
void expect_every_reader_bounded(const TempDir& dir, const std::string& path) {
  const std::vector<std::vector<std::string>> commands = {
      {"show", path},
      {"show", "--scan", "--json", path},
      {"export", path, "--csv", dir.file("out.csv"), "--force"},
      {"report", path, "-o", dir.file("out.html"), "--force", "--bins", "20000"},
      {"diff", path, path},
      {"top", "--replay", path, "--once"},
  };
  for (const std::vector<std::string>& args : commands) expect_bounded(dir, args);
  // The page is bounded too: its size depends on the caps, not on the file.
  std::ifstream page(dir.file("out.html"), std::ios::binary | std::ios::ate);
  if (page) {
    EXPECT_LT(static_cast<uint64_t>(page.tellg()), 64U << 20U) << path;
  }
}

/// `show` and `show --scan` of `path` print the same (stdout and exit code).
void expect_show_is_the_scan(const TempDir& dir, const std::string& path) {
  const CliResult show = run_limited(dir, {"show", "--json", path});
  const CliResult scan = run_limited(dir, {"show", "--scan", "--json", path});
  EXPECT_EQ(show.exit_code, scan.exit_code) << path;
  EXPECT_EQ(show.out, scan.out) << path;
}

struct Forged {
  const char* name;
  std::string (*make)();
};

TEST(CliBounds, EveryReaderStaysWithinItsBoundsOnForgedFiles) {
  VRAMSCOPE_REQUIRE_CLI();
  VRAMSCOPE_SKIP_TIME_BOUND_UNDER_TSAN();
  // Under ASan (no address-space limit, code at -O0) the bounds mean nothing and the long files
  // took 185 s of the 300 s timeout: the same shapes at a tenth of their length or less still
  // drive every command through them for ASan and UBSan to watch.
  static constexpr bool full = !sanitized_build;
  TempDir dir;
  const std::vector<Forged> files = {
      {"deep_digest", [] { return forge::forge_deep_digest(); }},
      {"big_digests", [] { return forge::forge_big_digests(100); }},
      {"table_bomb", [] { return forge::forge_table_bomb(); }},
      {"pid_churn", [] { return forge::forge_pid_churn(full ? 200 : 20, 1900, 4096); }},
      {"many_processes", [] { return forge::forge_many_processes(5000, 3); }},
      {"trailer_flood", [] { return forge::forge_trailer_flood(full ? 4U << 20U : 256U << 10U); }},
      {"small_segments", [] { return forge::genuine(full ? 100'000 : 5'000, nullptr, 1); }},
  };
  for (const Forged& forged : files) {
    const std::string path = dir.file(std::string(forged.name) + ".vsrec");
    write_bytes(path, forged.make());
    SCOPED_TRACE(forged.name);
    expect_every_reader_bounded(dir, path);
  }
}

// Issue 45: `export --trace` kept every process's whole command line to the end (40 samples of
// 1,900 new pids with 32 KiB commands, a 145 KB file: 2.4 GiB); one legal sample of 9 GPUs x
// 65,536 processes (403 KB) took `export --jsonl` to 1.15 GiB (a document of the whole sample)
// and `top --replay --once` to 0.98 GiB (the join, every row and a sorted copy at once).
TEST(CliBounds, ExportsAndReplayStayWithinTheirBoundsOnWideSamplesAndNewProcesses) {
  VRAMSCOPE_REQUIRE_CLI();
  VRAMSCOPE_SKIP_TIME_BOUND_UNDER_TSAN();
  static constexpr bool full = !sanitized_build;
  TempDir dir;
  const std::string wide = dir.file("wide_sample.vsrec");
  write_bytes(wide, forge::forge_wide_sample(9, full ? 65536 : 4096));
  const std::string churn = dir.file("long_command_churn.vsrec");
  write_bytes(churn, forge::forge_pid_churn(full ? 40 : 4, 1900, 32U << 10U));
  {
    SCOPED_TRACE("wide_sample");
    expect_every_reader_bounded(dir, wide);
    expect_bounded(dir, {"export", wide, "--jsonl", dir.file("wide.jsonl"), "--force"});
    expect_bounded(dir, {"export", wide, "--trace", dir.file("wide.json"), "--force"});
  }
  {
    SCOPED_TRACE("long_command_churn");
    expect_bounded(dir, {"export", churn, "--trace", dir.file("churn.json"), "--force"});
    expect_bounded(dir, {"top", "--replay", churn, "--once"});
  }
  // What they wrote is whole: one line a sample, and a trace that names every process.
  std::ifstream lines(dir.file("wide.jsonl"));
  std::size_t count = 0;
  for (std::string line; std::getline(lines, line);) ++count;
  EXPECT_EQ(count, 1U);
  std::ifstream trace_file(dir.file("churn.json"), std::ios::binary);
  const std::string trace{std::istreambuf_iterator<char>(trace_file),
                          std::istreambuf_iterator<char>()};
  EXPECT_NE(trace.find("\"pid 100 ("), std::string::npos);
  EXPECT_NE(trace.find("\"dropped_events\":0"), std::string::npos);
}

TEST(CliBounds, ShowSaysWhatTheScanSaysOnDamagedForgedAndJoinedFiles) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  // A genuine 100-sample recording with `record`'s digests, a bit flipped in its samples: show
  // said "Samples 100, Tail clean" from the digests while the scan read none.
  const std::string genuine = forge::genuine(100, std::make_shared<report::SummaryDigest>(), 1024);
  const std::string flipped = dir.file("flipped.vsrec");
  write_bytes(flipped, forge::flip_bit(genuine, forge::first_chunk_offset() + 12, 2));
  expect_show_is_the_scan(dir, flipped);
  const CliResult flipped_show = run_limited(dir, {"show", flipped});
  EXPECT_EQ(flipped_show.out.find("Tail      clean"), std::string::npos) << flipped_show.out;

  // Digests claiming a GPU no sample names, at 2^64-1 bytes.
  report::RecordingSummary claim;
  SystemSample s = forge::one_gpu(forge::at_ns(0));
  s.devices[0].uuid = "GPU-not-in-any-sample";
  s.devices[0].used_bytes = UINT64_MAX;
  claim.add(s);
  const std::string forged = dir.file("forged.vsrec");
  write_bytes(forged,
              forge::genuine(20, std::make_shared<forge::FixedDigest>(claim.serialize()), 1));
  expect_show_is_the_scan(dir, forged);
  EXPECT_EQ(run_limited(dir, {"show", forged}).out.find("GPU-not-in-any-sample"),
            std::string::npos);

  // `cat a b`: the same times, other peaks; show reported b alone, clean.
  std::vector<SystemSample> later = forge::plain_samples(40);
  for (SystemSample& sample : later) sample.devices[0].used_bytes = 77ULL << 30U;
  RecordingWriterOptions options;
  options.digest = std::make_shared<report::SummaryDigest>();
  const std::string joined = dir.file("joined.vsrec");
  write_bytes(joined, forge::genuine(40, std::make_shared<report::SummaryDigest>()) +
                          forge::write(later, options));
  expect_show_is_the_scan(dir, joined);
  const CliResult joined_show = run_limited(dir, {"show", "--json", joined});
  EXPECT_NE(joined_show.out.find("\"corrupt\""), std::string::npos) << joined_show.out;
  EXPECT_EQ(joined_show.out.find("82678120448"), std::string::npos) << "77 GiB is b's";
}

}  // namespace
}  // namespace vramscope::testing
