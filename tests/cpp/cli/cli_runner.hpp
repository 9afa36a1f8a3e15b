// tests/cpp/cli/cli_runner.hpp -- runs the real `vramscope` binary with a controlled environment
//
// Every test gets its own temporary directory (removed at the end) which also serves as the
// agents' segment directory, so agents running on the test machine never leak into goldens.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vramscope/agent_segment.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::testing {

/// What one run of the binary produced.
struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

/// A scratch directory, created 0700 and removed recursively by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return m_path; }
  /// path() + "/" + name
  std::string file(const std::string& name) const { return m_path + "/" + name; }

 private:
  std::string m_path;
};

/// Path of the vramscope binary under test (compiled in by tests.cmake); empty when not built.
std::string cli_path();
/// Path of the NVML test double library; empty when not built.
std::string nvml_double_path();
/// tests/data/nvml/<name>: a canonical NVML double script.
std::string nvml_script(const std::string& name);

/// Runs vramscope with `args`. The environment is the test's own with TZ=UTC, NO_COLOR unset,
/// VRAMSCOPE_SHM_DIR=<dir>/shm, plus `env` (a value of std::nullopt removes the variable).
/// stdin is /dev/null; stdout and stderr are captured.
CliResult run_cli(const TempDir& dir, const std::vector<std::string>& args,
                  const std::map<std::string, std::optional<std::string>>& env = {});

/// Starts vramscope like run_cli() but does not wait: stdout goes to `stdout_fd` (kept open by
/// the caller), stderr to <dir>/.stderr. Returns the pid, or -1.
pid_t spawn_cli(const TempDir& dir, const std::vector<std::string>& args,
                const std::map<std::string, std::optional<std::string>>& env, int stdout_fd);

/// Waits for `pid` and returns its exit status as a shell shows it (128 + signal if killed).
int wait_exit_code(pid_t pid);

/// A real process (`sleep 600`) that the double lists and an agent segment claims, so that the
/// join of both views can be checked end to end. Killed and reaped by the destructor.
class SleepingProcess {
 public:
  SleepingProcess();
  ~SleepingProcess();
  SleepingProcess(const SleepingProcess&) = delete;
  SleepingProcess& operator=(const SleepingProcess&) = delete;
  /// 0 when it could not be started.
  pid_t pid() const { return m_pid; }

 private:
  pid_t m_pid = 0;
};

/// One training process on one H200 as both views see it: a SleepingProcess that the NVML double
/// (script written into the test's directory) lists with 30000 MiB used, and an agent segment
/// there that claims it with `stats` (allocated 20480 MiB, reserved 24576 MiB: 5424 MiB beyond
/// reserved by the driver's reading).
class OneGpuTrainer {
 public:
  static constexpr const char* uuid = "GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00";
  static constexpr uint64_t mib = uint64_t{1} << 20U;

  explicit OneGpuTrainer(const TempDir& dir);
  /// 0 when the process could not be started.
  pid_t pid() const { return m_process.pid(); }
  /// The environment that makes vramscope read the double and this directory's segments.
  const std::map<std::string, std::optional<std::string>>& env() const { return m_env; }
  /// Publishes `stats` as the agent's slot 0.
  void publish() { m_writer->publish(0, stats); }

  /// What the agent publishes.
  AllocatorSample stats;

 private:
  SleepingProcess m_process;
  std::map<std::string, std::optional<std::string>> m_env;
  std::unique_ptr<AgentSegmentWriter> m_writer;
};

/// `env` for the NVML double playing `script` (a path).
std::map<std::string, std::optional<std::string>> double_env(const std::string& script);

/// Skips the current test when the binary or the NVML double was not built.
#define VRAMSCOPE_REQUIRE_CLI()                                                   \
  do {                                                                            \
    if (::vramscope::testing::cli_path().empty()) GTEST_SKIP() << "no CLI built"; \
  } while (0)
#define VRAMSCOPE_REQUIRE_DOUBLE()                                                          \
  do {                                                                                      \
    VRAMSCOPE_REQUIRE_CLI();                                                                \
    if (::vramscope::testing::nvml_double_path().empty()) GTEST_SKIP() << "no NVML double"; \
  } while (0)

}  // namespace vramscope::testing
