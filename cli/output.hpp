// cli/output.hpp -- writing to stdout so that pipes behave: flush per record, quiet on EPIPE
#pragma once

#include <string>
#include <string_view>

namespace vramscope::cli {

/// Writes `text` to stdout and flushes it. Returns false when the reader went away (EPIPE: the
/// command should end quietly with status 0); throws vramscope::Error on any other failure.
bool write_stdout(std::string_view text);

/// Prints `message` to stderr as one "vramscope: warning: ..." line (SamplerOptions::on_warning).
void warn_stderr(const std::string& message);

}  // namespace vramscope::cli
