// cli/file_args.hpp -- recording arguments checked while parsing, in vramscope's words, one exit code
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace vramscope::cli {

/// Why `path` cannot be read as an input file, and the exit code that says so.
struct UnreadableFile {
  /// "no such file", "is a directory, not a file", "cannot read it: Permission denied"; "" when
  /// the path can be read as a file.
  std::string reason;
  /// 1 for an error of the environment (missing, no permission), 2 for a path that names no
  /// regular file at all (a directory, a symlink loop, a FIFO, a device): a usage error.
  int exit_code = 0;
};

/// Checks `path` without opening it (a FIFO would block): see UnreadableFile.
UnreadableFile unreadable_file_reason(const std::string& path);

/// A CLI11 check for an input recording, shared by show, export, top --replay, report and diff so
/// that they fail alike: throws vramscope::Error "FILE: <reason>" with UnreadableFile's exit code
/// (CLI::ExistingFile said "File does not exist: ..." with exit 2 for some and let others through
/// to fail with exit 1 later).
CLI::Validator readable_file();

}  // namespace vramscope::cli
