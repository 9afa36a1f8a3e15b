// cli/output.hpp -- writing to stdout so that pipes behave: flush per record, quiet on EPIPE
#pragma once

#include <string_view>

namespace vramscope::cli {

/// Writes `text` to stdout and flushes it. Returns false when the reader went away (EPIPE: the
/// command should end quietly with status 0); throws vramscope::Error on any other failure.
bool write_stdout(std::string_view text);

}  // namespace vramscope::cli
