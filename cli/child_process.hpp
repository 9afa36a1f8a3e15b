// cli/child_process.hpp -- the command `vramscope record -- CMD...` runs and waits for
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace vramscope::cli {

/// A command started with the recorder's stdin, stdout, stderr and process group (so a
/// terminal's Ctrl-C reaches it directly), with default signal dispositions restored.
class ChildProcess {
 public:
  /// Starts `argv` (searched in PATH). Throws vramscope::Error with exit code 127 when it cannot
  /// be started (like a shell's "command not found").
  static ChildProcess spawn(const std::vector<std::string>& argv);

  /// Has it exited? Non-blocking; reaps it once.
  bool poll_exited();
  /// Blocks until it exits. Returns early (false) when a stop signal arrives while waiting.
  bool wait();
  /// Exit status as a shell reports it: the exit code, or 128 + signal when killed.
  /// Empty while it runs.
  std::optional<int> exit_status() const { return m_status; }
  /// Sends `signal_number` unless it already exited.
  void send_signal(int signal_number) const;
  pid_t pid() const { return m_pid; }

 private:
  explicit ChildProcess(pid_t pid) : m_pid(pid) {}
  void record_status(int wait_status);

  pid_t m_pid;
  std::optional<int> m_status;
};

/// The command as one line for metadata and messages: arguments joined by spaces, each quoted
/// for a POSIX shell when it needs it.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace vramscope::cli
