// cli/file_args.hpp -- file arguments checked while parsing, in vramscope's words, with exit 1
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace vramscope::cli {

/// Why `path` cannot be read as an input file ("no such file", "is a directory, not a file",
/// "cannot read it: Permission denied"), or "" when it can.
std::string unreadable_file_reason(const std::string& path);

/// A CLI11 check for an input file (a recording). Unlike CLI::ExistingFile (a usage error,
/// exit 2, "File does not exist: ..."), a file that is missing, a directory or unreadable
/// throws vramscope::Error "FILE: no such file" with exit 1, the same as when opening it
/// fails later: a wrong path is an error of the environment, not of the command line.
CLI::Validator readable_file();

}  // namespace vramscope::cli
