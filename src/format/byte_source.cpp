// src/format/byte_source.cpp -- a recording's bytes from a file (a bounded window refilled in blocks) or memory
#include "vramscope/format/byte_source.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::format {
namespace {

class FileSource final : public ByteSource {
 public:
  FileSource(std::string path, int fd) : m_path(std::move(path)), m_fd(fd) {}
  ~FileSource() override { ::close(m_fd); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() override {
    struct stat info {};
    if (::fstat(m_fd, &info) != 0) throw Error(m_path + ": cannot stat: " + errno_text(errno));
    return static_cast<uint64_t>(info.st_size);
  }

  std::size_t read_at(uint64_t offset, char* out, std::size_t size) override {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(m_fd, out + done, size - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw Error(m_path + ": cannot read: " + errno_text(errno));
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

  std::string_view view(uint64_t offset, std::size_t size) override {
    // Within the window: no call at all. A window that ended short (the end of the file when it
    // was read) does not answer for bytes past it: those are read again, the file may have grown.
    if (offset >= m_window_offset && offset - m_window_offset <= m_window.size() &&
        size <= m_window.size() - (offset - m_window_offset)) {
      return std::string_view(m_window).substr(offset - m_window_offset, size);
    }
    // The window is either one block or the one request that is larger: a chunk at most
    // (callers ask for no more than one chunk at a time), so memory stays bounded.
    const std::size_t want = std::max(size, read_block_bytes);
    m_window.resize(want);
    m_window_offset = offset;
    try {
      m_window.resize(read_at(offset, m_window.data(), want));
    } catch (...) {
      m_window.clear();
      throw;
    }
    // Once a larger chunk is read, a block is enough again: give the rest back.
    if (m_window.capacity() > 2 * read_block_bytes && size <= read_block_bytes) {
      m_window.shrink_to_fit();
    }
    return std::string_view(m_window).substr(0, std::min(size, m_window.size()));
  }

 private:
  std::string m_path;
  int m_fd;
  /// File bytes [m_window_offset, m_window_offset + m_window.size()), as last read.
  std::string m_window;
  uint64_t m_window_offset = 0;
};

class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::string bytes) : m_bytes(std::move(bytes)) {}
  uint64_t size() override { return m_bytes.size(); }
  std::size_t read_at(uint64_t offset, char* out, std::size_t size) override {
    const std::string_view bytes = view(offset, size);
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    return bytes.size();
  }
  std::string_view view(uint64_t offset, std::size_t size) override {
    if (offset >= m_bytes.size()) return {};
    return std::string_view(m_bytes).substr(static_cast<std::size_t>(offset), size);
  }

 private:
  std::string m_bytes;
};

}  // namespace

std::unique_ptr<ByteSource> ByteSource::file(std::string path, int fd) {
  return std::make_unique<FileSource>(std::move(path), fd);
}

std::unique_ptr<ByteSource> ByteSource::memory(std::string bytes) {
  return std::make_unique<MemorySource>(std::move(bytes));
}

}  // namespace vramscope::format
