// cli/record.hpp -- the recording loop of `vramscope record`, shared with `vramscope run --record`
#pragma once

#include <string>
#include <vector>

namespace vramscope::cli {

/// What `vramscope record` was asked to do.
struct RecordOptions {
  /// Recording file to create (mode 0600).
  std::string output;
  /// Time between samples ("10ms", "0.5s", "2" = seconds).
  std::string interval = "100ms";
  /// Stop recording after this long; empty records until the command exits or Ctrl-C.
  std::string duration;
  /// Overwrite `output` if it exists?
  bool force = false;
  /// Driver view only, without the agents' shared memory?
  bool no_agents = false;
  /// Start a new file once the current one reaches this size ("1GiB", "500MB"); empty: never.
  std::string max_size;
  /// With max_size: rotated files to keep (FILE.1 newest ... FILE.N oldest, older ones removed).
  unsigned rotate = 5;
  /// Command to run and record; empty records until stopped.
  std::vector<std::string> command;
};

/// Records until the command exits (returning its exit status), --duration or a stop signal.
/// Throws vramscope::Error for bad options or when the recording cannot start.
int run_record(const RecordOptions& options);

}  // namespace vramscope::cli
