// cli/file_args.cpp -- recording arguments checked while parsing (see file_args.hpp)
#include "file_args.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {

namespace {

/// Why a path that names no regular file is no recording, in a user's words.
const char* not_a_file_reason(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory, not a file";
  if (S_ISFIFO(mode)) return "is a FIFO, not a file";
  if (S_ISSOCK(mode)) return "is a socket, not a file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a file";
  return "is not a regular file";
}

}  // namespace

UnreadableFile unreadable_file_reason(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return {"no such file", ExitError};
    if (error == ELOOP) return {"is a symlink loop, not a file", ExitUsage};
    return {std::string("cannot read it: ") + errno_text(error), ExitError};
  }
  if (!S_ISREG(st.st_mode)) return {not_a_file_reason(st.st_mode), ExitUsage};
  if (::access(path.c_str(), R_OK) != 0) {
    return {std::string("cannot read it: ") + errno_text(errno), ExitError};
  }
  return {};
}

CLI::Validator readable_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        const UnreadableFile unreadable = unreadable_file_reason(path);
        if (!unreadable.reason.empty())
          throw Error(path + ": " + unreadable.reason, unreadable.exit_code);
        return "";
      },
      "");
}

}  // namespace vramscope::cli
