// tests/cpp/cli/test_cli_hostile.cpp -- malformed arguments, paths that are not recordings, and a
// recording that fails under a command
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include "cli_runner.hpp"

namespace vramscope::testing {
namespace {

/// A small valid recording made with the NVML double; empty when it could not be made.
std::string small_recording(const TempDir& dir) {
  const std::string file = dir.file("small.vsrec");
  const CliResult r = run_cli(dir, {"record", "-o", file, "-i", "5ms", "--duration", "20ms"},
                              double_env(nvml_script("two_gpus.json")));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return file;
}

/// Limits the size of files this process and its children write (write() then fails with EFBIG
/// instead of raising SIGXFSZ), restoring both on destruction.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &m_previous);
    m_previous_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = m_previous;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &m_previous);
    std::signal(SIGXFSZ, m_previous_handler);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit m_previous{};
  void (*m_previous_handler)(int) = nullptr;
};

TEST(CliHostile, NumbersCli11WouldBendAreUsageErrors) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const auto env = double_env(nvml_script("two_gpus.json"));
  // -1 became 2^64-1 (watch forever), "" became 0 (also forever), 2^64 wrapped. The size limit
  // ends a watch that wrongly runs: its stdout fills, and it exits 0 instead of 2.
  for (const std::string count : {"-1", "", "18446744073709551616", " 2", "1e3", "+4"}) {
    const FileSizeLimit limit(64 * 1024);
    const CliResult r = run_cli(dir, {"watch", "-i", "1ms", "-n", count}, env);
    EXPECT_EQ(r.exit_code, 2) << "-n '" << count << "': " << r.err;
  }
  EXPECT_EQ(run_cli(dir, {"watch", "-i", "1ms", "-n", "2"}, env).exit_code, 0);

  const std::string recording = small_recording(dir);
  for (const std::string events : {"18446744073709551617", "-1", ""}) {
    const CliResult r = run_cli(
        dir, {"export", recording, "--trace", dir.file("t.json"), "--max-events", events}, env);
    EXPECT_EQ(r.exit_code, 2) << "--max-events '" << events << "': " << r.err;
  }
  // An empty duration meant "no limit": the recorder never stopped (the size limit stops it).
  CliResult empty_duration;
  {
    const FileSizeLimit limit(64 * 1024);
    empty_duration =
        run_cli(dir, {"record", "-o", dir.file("d.vsrec"), "-i", "1ms", "-d", ""}, env);
  }
  EXPECT_EQ(empty_duration.exit_code, 2) << empty_duration.err;
  EXPECT_NE(::access(dir.file("d.vsrec").c_str(), F_OK), 0) << "nothing was recorded";
  for (const std::string speed : {"nan", "inf", "-nan"}) {
    const CliResult r =
        run_cli(dir, {"top", "--replay", recording, "--speed", speed, "--once"}, env);
    EXPECT_EQ(r.exit_code, 2) << "--speed " << speed << ": " << r.err;
  }
}

TEST(CliHostile, PathsThatAreNoRecordingFailAlikeInShowTopAndExport) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::string loop = dir.file("loop.vsrec");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  ASSERT_EQ(::mkdir(dir.file("dir.vsrec").c_str(), 0700), 0);
  ASSERT_EQ(::mkfifo(dir.file("fifo.vsrec").c_str(), 0600), 0);
  const std::map<std::string, std::optional<std::string>> no_gpu = {
      {"VRAMSCOPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}};
  // docs/security.md: a path that names no regular file is exit 2 in every reading command; a
  // missing one is an error of the environment (exit 1, docs/cli.md).
  const std::vector<std::pair<std::string, int>> paths = {
      {dir.file("missing.vsrec"), 1}, {dir.file("dir.vsrec"), 2}, {loop, 2},
      {dir.file("fifo.vsrec"), 2},    {"/dev/zero", 2},           {"/dev/null", 2}};
  for (const auto& [path, expected] : paths) {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"show", path},
                                                 {"top", "--replay", path, "--once"},
                                                 {"export", path, "--csv", dir.file("o.csv")},
                                                 {"report", path, "-o", dir.file("o.html")},
                                                 {"diff", path, path}}) {
      const CliResult r = run_cli(dir, args, no_gpu);
      EXPECT_EQ(r.exit_code, expected) << args[0] << " " << path << ": " << r.err;
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
      EXPECT_EQ(r.err.find("empty file"), std::string::npos) << r.err;
    }
  }
  EXPECT_NE(::access(dir.file("o.csv").c_str(), F_OK), 0) << "no output for a failed export";
  EXPECT_NE(::access(dir.file("o.html").c_str(), F_OK), 0) << "no output for a failed report";
}

TEST(CliHostile, ARecordingThatFillsTheDiskStillReturnsTheCommandsStatus) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("full.vsrec");
  CliResult r;
  {
    // The header fits, the first chunk of eight GPUs does not: the recording stops at once.
    const FileSizeLimit limit(1024);
    r = run_cli(dir, {"record", "-o", file, "-i", "5ms", "--", "/bin/sh", "-c", "exit 7"},
                double_env(nvml_script("eight_gpus_64_procs.json")));
  }
  EXPECT_NE(r.err.find("recording stopped"), std::string::npos) << r.err;
  EXPECT_EQ(r.exit_code, 7) << "the command's status, not the recorder's: " << r.err;
}

}  // namespace
}  // namespace vramscope::testing
