// cli/atomic_file.cpp -- temp file in the target's directory, fsync, then link or rename
#include "atomic_file.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what, int error) {
  throw Error("cannot write " + path + ": " + what + ": " + errno_text(error));
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view content, bool overwrite) {
  std::string pattern = path + ".tmp-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail(path, "cannot create a temporary file beside it", errno);
  const std::string temp(name.data());
  const auto abandon = [&](const std::string& what, int error) {
    ::close(fd);
    ::unlink(temp.c_str());
    fail(path, what, error);
  };
  if (const int error = write_all(fd, content.data(), content.size()); error != 0) {
    abandon("write failed", error);
  }
  if (::fsync(fd) != 0) abandon("fsync failed", errno);
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    fail(path, "close failed", errno);
  }
  // link() fails with EEXIST on anything already there, a dangling symlink included.
  const int moved =
      overwrite ? ::rename(temp.c_str(), path.c_str()) : ::link(temp.c_str(), path.c_str());
  const int error = errno;
  if (moved != 0 || !overwrite) ::unlink(temp.c_str());
  if (moved != 0) {
    if (error == EEXIST) throw Error(path + " already exists (use --force to replace it)");
    fail(path, "cannot move the temporary file into place", error);
  }
}

}  // namespace vramscope::cli
