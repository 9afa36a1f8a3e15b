// cli/output.cpp -- stdout writes that turn EPIPE into "stop", not into a crash or an error
#include "output.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {

bool write_stdout(std::string_view text) {
  errno = 0;
  const std::size_t written = std::fwrite(text.data(), 1, text.size(), stdout);
  if (written == text.size() && std::fflush(stdout) == 0) return true;
  if (errno == EPIPE) return false;
  throw Error(std::string("cannot write to standard output: ") + errno_text(errno));
}

void warn_stderr(const std::string& message) {
  std::fprintf(stderr, "vramscope: warning: %s\n", message.c_str());
}

}  // namespace vramscope::cli
