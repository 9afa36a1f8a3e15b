// src/exporters/sink.cpp -- buffered, whole-record file output shared by the file exporters
#include "exporters/sink.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "vramscope/status.hpp"

namespace vramscope::exporters {

namespace {

std::string errno_text(int error_number) { return std::strerror(error_number); }

}  // namespace

BufferedFile::BufferedFile(const std::string& path, bool overwrite, std::size_t buffer_bytes)
    : m_path(path), m_buffer_bytes(buffer_bytes) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  flags |= overwrite ? O_TRUNC : O_EXCL;
  m_fd = ::open(path.c_str(), flags, 0600);
  if (m_fd < 0) {
    const int error_number = errno;
    if (error_number == EEXIST) {
      throw Error("cannot create " + path + ": file exists (choose another name)");
    }
    throw Error("cannot create " + path + ": " + errno_text(error_number));
  }
  m_buffer.reserve(buffer_bytes);
}

BufferedFile::~BufferedFile() {
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report; callers that care call close() themselves.
  }
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
  while (done < m_buffer.size()) {
    const ssize_t n = ::write(m_fd, m_buffer.data() + done, m_buffer.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error_number = errno;
      m_buffer.erase(0, done);
      throw Error("cannot write " + m_path + ": " + errno_text(error_number));
    }
    done += static_cast<std::size_t>(n);
  }
  m_buffer.clear();
}

void BufferedFile::close() {
  if (m_fd < 0) return;
  flush();
  const int fd = m_fd;
  m_fd = -1;
  if (::close(fd) != 0 && errno != EINTR) {
    throw Error("cannot close " + m_path + ": " + errno_text(errno));
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
    if (error_number == EEXIST) throw Error("cannot create directory " + dir + ": " + prefix + " is not a directory");
    throw Error("cannot create directory " + prefix + ": " + errno_text(error_number));
  }
}

}  // namespace vramscope::exporters
