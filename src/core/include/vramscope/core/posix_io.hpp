// src/core/include/vramscope/core/posix_io.hpp -- the two POSIX chores every file writer needs: errno as text, write all
//
// Header-only so that every layer (and the agent, which lists its sources by hand) can use them
// without one more object file.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace vramscope {

/// strerror() of a saved errno value (save errno first: building the message may change it).
inline std::string errno_text(int error_number) { return std::strerror(error_number); }

/// Writes all of `size` bytes, resuming after partial writes and EINTR. Returns 0 or the errno
/// value of the failing write(2) (EIO for one that wrote nothing); `written` says how much went
/// out either way.
inline int write_all(int fd, const char* bytes, std::size_t size, std::size_t* written = nullptr) {
  std::size_t done = 0;
  int error_number = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A write of nothing would repeat forever: report it as an I/O error.
      error_number = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (written != nullptr) *written = done;
  return error_number;
}

}  // namespace vramscope
