// src/exporters/sink.cpp -- buffered, whole-record file output shared by the file exporters
#include "vramscope/exporters/sink.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

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

void make_private_directories(const std::string& dir) {
  if (dir.empty()) throw Error("empty directory name");
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    const std::string prefix = dir.substr(0, pos);
    if (prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), 0700) == 0) continue;
    const int error_number = errno;
    struct stat info {};
    if (error_number == EEXIST && ::stat(prefix.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      continue;
    }
    if (error_number == EEXIST)
      throw Error("cannot create directory " + dir + ": " + prefix + " is not a directory");
    throw Error("cannot create directory " + prefix + ": " + errno_text(error_number));
  }
}

}  // namespace vramscope::exporters
