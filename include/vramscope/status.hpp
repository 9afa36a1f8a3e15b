// include/vramscope/status.hpp -- process exit codes and the error type shared by every layer
#pragma once

#include <stdexcept>
#include <string>

namespace vramscope {

/// Exit codes of every vramscope command (a stable contract, see docs/cli.md).
enum ExitCode : int {
  ExitOk = 0,
  ExitError = 1,
  ExitUsage = 2,
  /// No NVIDIA driver, no NVML library, or no GPU: printed with a one-line reason.
  ExitNoGpu = 3,
  /// A check the user asked for failed: `diff --fail-if-peak-grows` saw a peak grow too much.
  ExitCheckFailed = 4,
};

/// An error worth one clear line to the user; `exit_code` says how the CLI should end.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = ExitError)
      : std::runtime_error(message), m_exit_code(exit_code) {}
  /// The exit code the command should end with.
  int exit_code() const noexcept { return m_exit_code; }

 private:
  int m_exit_code;
};

}  // namespace vramscope
