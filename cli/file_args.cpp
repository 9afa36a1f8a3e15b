// cli/file_args.cpp -- file arguments checked while parsing (see file_args.hpp)
#include "file_args.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {

std::string unreadable_file_reason(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return errno == ENOENT || errno == ENOTDIR
               ? "no such file"
               : std::string("cannot read it: ") + errno_text(errno);
  }
  if (S_ISDIR(st.st_mode)) return "is a directory, not a file";
  if (::access(path.c_str(), R_OK) != 0) return std::string("cannot read it: ") + errno_text(errno);
  return "";
}

CLI::Validator readable_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        const std::string reason = unreadable_file_reason(path);
        if (!reason.empty()) throw Error(path + ": " + reason, ExitError);
        return "";
      },
      "");
}

}  // namespace vramscope::cli
