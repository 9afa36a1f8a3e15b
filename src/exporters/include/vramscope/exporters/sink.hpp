// src/exporters/include/vramscope/exporters/sink.hpp -- the Sink interface every exporter implements, and buffered file output
//
// Exporters receive SystemSamples and never query a backend: a live sampler, a recording being
// replayed and a test all feed them the same way. Buffering lives once, in BufferedFile, so each
// exporter only decides what bytes one sample becomes and when a record is complete.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "vramscope/sample.hpp"

namespace vramscope::exporters {

/// A consumer of samples (TensorBoard, Chrome trace, CSV...). Not thread-safe: one thread writes.
class Sink {
 public:
  virtual ~Sink() = default;
  /// Consumes one sample; output may stay buffered until flush().
  virtual void write(const SystemSample& sample) = 0;
  /// Pushes everything written so far to its destination.
  virtual void flush() = 0;
};

/// Append-only output file with an in-memory buffer that is written with whole-record granularity:
/// append() copies bytes into the buffer, and only flush() (or a full buffer at a record boundary)
/// hands them to the kernel, so a reader never sees half a record unless the process dies inside
/// write(2) itself. Files are created 0600; a missing parent directory is created 0700.
///
/// No name is ever followed: a new file is created O_EXCL | O_NOFOLLOW, and an overwrite writes
/// a temporary file in the same directory that close() renames over `path` (so a symlink there
/// is replaced, not written through, and the old file stays whole until the new one is). Output
/// that is not completed -- close() failed, or the object is destroyed while an exception
/// propagates -- is removed: a failed export leaves no partial file.
class BufferedFile {
 public:
  /// Creates `path` (O_CREAT|O_EXCL unless `overwrite`, then a temporary file beside it),
  /// O_CLOEXEC, mode 0600. Throws vramscope::Error naming the path and the reason on failure.
  BufferedFile(const std::string& path, bool overwrite, std::size_t buffer_bytes = 1U << 16U);
  ~BufferedFile();
  BufferedFile(const BufferedFile&) = delete;
  BufferedFile& operator=(const BufferedFile&) = delete;

  /// Appends one complete record. When the buffer would overflow, it is flushed first, so a
  /// record is never split across two write(2) calls by us.
  void append_record(std::string_view bytes);
  /// Writes the buffer to the file (loops over short writes, retries EINTR). Throws on I/O errors.
  void flush();
  /// Flushes, closes and (when overwriting) renames into place; later calls are no-ops. Also
  /// done by the destructor (errors swallowed there), unless the destructor runs because of an
  /// exception: then the incomplete output is discarded.
  void close();
  /// Closes and removes what this object created, without writing the buffer; no-op once
  /// closed.
  void discard();
  /// Is an exception propagating that was not when this file was opened? Owners whose close()
  /// would write more (a closing bracket) check this in their destructors.
  bool abandoned() const;
  /// Bytes handed to append_record() so far (buffered or written).
  std::size_t total_bytes() const { return m_total_bytes; }
  /// The file's path as given.
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
  std::string m_buffer;
  std::size_t m_buffer_bytes;
  std::size_t m_total_bytes = 0;
  int m_fd = -1;
  /// The file written when overwriting (renamed to m_path by close()); empty otherwise.
  std::string m_temp_path;
  /// std::uncaught_exceptions() at construction (see abandoned()).
  int m_exceptions_at_open;
};

/// Creates `dir` and its missing parents with mode 0700, walking one component at a time with
/// openat(O_NOFOLLOW) so that another local user cannot redirect or later swap what we write
/// into (docs/security.md). Existing components are left as they are, but refused when:
/// - `dir` itself is a symlink, belongs to another user, or is writable by group or others;
/// - a parent belongs to another user other than root, or is writable by group or others
///   without the sticky bit (/tmp is fine, a 0777 directory is not);
/// - a parent is a symlink that belongs to another user other than root.
/// Throws vramscope::Error saying which component and why, or when one cannot be created or is
/// not a directory.
void make_private_directories(const std::string& dir);

}  // namespace vramscope::exporters
