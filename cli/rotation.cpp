// cli/rotation.cpp -- rotation of recording files by rename, oldest removed
#include "rotation.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

std::string numbered(const std::string& path, unsigned n) {
  return n == 0 ? path : path + "." + std::to_string(n);
}

/// Does `path` exist (as a name; lstat, so a dangling symlink exists too)? Refuses names that
/// are neither regular files nor symlinks: rotation must not move a directory or a device.
bool exists_as_file(const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return false;
    throw Error(path + ": cannot rotate: " + errno_text(errno));
  }
  if (!S_ISREG(info.st_mode) && !S_ISLNK(info.st_mode)) {
    throw Error(path + ": not a regular file, refusing to rotate it");
  }
  return true;
}

}  // namespace

void rotate_recordings(const std::string& path, unsigned keep) {
  // The oldest goes first, then each moves up one; rename() replaces nothing that exists,
  // because the name above was just freed.
  if (exists_as_file(numbered(path, keep)) && ::unlink(numbered(path, keep).c_str()) != 0) {
    throw Error(numbered(path, keep) + ": cannot remove old recording: " + errno_text(errno));
  }
  for (unsigned n = keep; n > 0; --n) {
    const std::string from = numbered(path, n - 1);
    if (!exists_as_file(from)) continue;
    if (::rename(from.c_str(), numbered(path, n).c_str()) != 0) {
      throw Error(from + ": cannot rotate to " + numbered(path, n) + ": " + errno_text(errno));
    }
  }
}

}  // namespace vramscope::cli
