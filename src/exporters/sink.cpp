// src/exporters/sink.cpp -- buffered, whole-record file output shared by the file exporters
#include "vramscope/exporters/sink.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {

BufferedFile::BufferedFile(const std::string& path, bool overwrite, std::size_t buffer_bytes)
    : m_path(path), m_buffer_bytes(buffer_bytes), m_exceptions_at_open(std::uncaught_exceptions()) {
  if (overwrite) {
    // Never opened by name: whatever is there (a symlink planted to redirect us, a file of
    // another mode) is replaced by rename() in close(), and stays as it was if we fail.
    struct stat info {};
    if (::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      throw Error("cannot create " + path + ": is a directory");
    }
    const std::size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
    const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string temp = dir + "." + base + ".vramscope-XXXXXX";
    // mkostemp: O_CREAT | O_EXCL, mode 0600, a name nobody can predict.
    m_fd = ::mkostemp(temp.data(), O_CLOEXEC);
    if (m_fd < 0) throw Error("cannot create " + path + ": " + errno_text(errno));
    m_temp_path = std::move(temp);
  } else {
    // O_EXCL never follows a symlink; O_NOFOLLOW says so twice.
    m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (m_fd < 0) {
      const int error_number = errno;
      if (error_number == EEXIST) {
        throw Error("cannot create " + path + ": file exists (choose another name)");
      }
      throw Error("cannot create " + path + ": " + errno_text(error_number));
    }
  }
  m_buffer.reserve(buffer_bytes);
}

BufferedFile::~BufferedFile() {
  if (abandoned()) {
    discard();
    return;
  }
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report; callers that care call close() themselves.
    discard();
  }
}

bool BufferedFile::abandoned() const {
  return m_fd >= 0 && std::uncaught_exceptions() > m_exceptions_at_open;
}

void BufferedFile::discard() {
  if (m_fd < 0) return;
  ::close(m_fd);
  m_fd = -1;
  // Only what this object created goes: the temporary file, or the new file it claimed.
  ::unlink(m_temp_path.empty() ? m_path.c_str() : m_temp_path.c_str());
}

void BufferedFile::append_record(std::string_view bytes) {
  if (!m_buffer.empty() && m_buffer.size() + bytes.size() > m_buffer_bytes) flush();
  m_buffer.append(bytes);
  m_total_bytes += bytes.size();
  if (m_buffer.size() >= m_buffer_bytes) flush();
}

void BufferedFile::flush() {
  if (m_fd < 0) return;
  std::size_t done = 0;
  if (const int error_number = write_all(m_fd, m_buffer.data(), m_buffer.size(), &done)) {
    // What went out is gone from the buffer; the rest stays for a retry.
    m_buffer.erase(0, done);
    throw Error("cannot write " + m_path + ": " + errno_text(error_number));
  }
  m_buffer.clear();
}

void BufferedFile::close() {
  if (m_fd < 0) return;
  try {
    flush();
  } catch (const Error&) {
    discard();
    throw;
  }
  const int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0 && errno != EINTR) {
    const int error_number = errno;
    ::unlink(m_temp_path.empty() ? m_path.c_str() : m_temp_path.c_str());
    throw Error("cannot close " + m_path + ": " + errno_text(error_number));
  }
  // rename() replaces the name itself, never what a symlink there points to.
  if (!m_temp_path.empty() && ::rename(m_temp_path.c_str(), m_path.c_str()) != 0) {
    const int error_number = errno;
    ::unlink(m_temp_path.c_str());
    throw Error("cannot replace " + m_path + ": " + errno_text(error_number));
  }
}

namespace {

/// Closes a directory descriptor of the walk below when it goes out of scope.
struct DirFd {
  int fd = -1;
  DirFd() = default;
  explicit DirFd(int opened) : fd(opened) {}
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
  ~DirFd() {
    if (fd >= 0) ::close(fd);
  }
  void reset(int opened) {
    if (fd >= 0) ::close(fd);
    fd = opened;
  }
};

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777U));
  return text;
}

/// Refuses a directory of the walk that another user could swap or fill (see the header).
void check_directory(const std::string& shown, const struct stat& info, bool is_last) {
  const uid_t me = ::geteuid();
  const std::string how = " (use a directory of your own, mode 0700)";
  if (is_last ? info.st_uid != me : info.st_uid != me && info.st_uid != 0) {
    throw Error("refusing directory " + shown + ": it belongs to another user (uid " +
                std::to_string(info.st_uid) + ")" + how);
  }
  const bool is_shared = (info.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (is_shared && (is_last || (info.st_mode & S_ISVTX) == 0)) {
    throw Error("refusing directory " + shown + ": other users can write in it (mode " +
                octal_mode(info.st_mode) + ")" + how);
  }
}

}  // namespace

void make_private_directories(const std::string& dir) {
  if (dir.empty()) throw Error("empty directory name");
  std::vector<std::string> names;
  for (std::size_t begin = 0; begin <= dir.size();) {
    const std::size_t slash = std::min(dir.find('/', begin), dir.size());
    // "." adds nothing to check (the working directory is the user's choice, as for "runs").
    const std::string name = dir.substr(begin, slash - begin);
    if (!name.empty() && name != ".") names.push_back(name);
    begin = slash + 1;
  }
  const bool is_absolute = dir.front() == '/';
  // Each step opens the next component relative to the last one, never by its whole path, so
  // what is checked is what is used: a name swapped after the check is not followed.
  DirFd current(::open(is_absolute ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (current.fd < 0) throw Error("cannot open directory " + dir + ": " + errno_text(errno));
  std::string shown = is_absolute ? "" : ".";
  if (names.empty()) names.emplace_back(".");  // "/" or ".": checked like any last component
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    const bool is_last = i + 1 == names.size();
    shown = i == 0 && !is_absolute ? name : shown + "/" + name;
    if (::mkdirat(current.fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
      throw Error("cannot create directory " + shown + ": " + errno_text(errno));
    }
    int next = ::openat(current.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      const int error_number = errno;
      struct stat link {};
      const bool is_link = ::fstatat(current.fd, name.c_str(), &link, AT_SYMLINK_NOFOLLOW) == 0 &&
                           S_ISLNK(link.st_mode);
      if (!is_link && error_number == ENOTDIR) {
        throw Error("cannot create directory " + dir + ": " + shown + " is not a directory");
      }
      if (!is_link) throw Error("cannot open directory " + shown + ": " + errno_text(error_number));
      // The directory itself is never a symlink (one planted there would redirect every event
      // file); on the way to it, only a link that we or root made is followed: in a shared
      // directory like /tmp, another user's link is a trap.
      if (is_last) {
        throw Error("refusing directory " + shown +
                    ": it is a symlink (give the directory it points to)");
      }
      if (link.st_uid != ::geteuid() && link.st_uid != 0) {
        throw Error("refusing directory " + shown + ": it is a symlink of another user (uid " +
                    std::to_string(link.st_uid) + ")");
      }
      next = ::openat(current.fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (next < 0) throw Error("cannot open directory " + shown + ": " + errno_text(errno));
    }
    current.reset(next);
    struct stat info {};
    if (::fstat(current.fd, &info) != 0) {
      throw Error("cannot open directory " + shown + ": " + errno_text(errno));
    }
    check_directory(shown, info, is_last);
  }
}

}  // namespace vramscope::exporters
