// include/vramscope/recording.hpp -- crash-safe recording files: writer and validating reader
//
// The on-disk layout is specified in docs/recording-format.md and drawn in src/format/.
// Contract: append-only checksummed chunks; after SIGKILL or power loss everything up to the last
// flushed chunk reads back, and a torn or corrupt tail is reported, never fatal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vramscope/sample.hpp"

namespace vramscope {

/// Describes a recording; written once in the file header.
struct RecordingMetadata {
  /// Format version of the file that was read (the writer always writes the current one).
  uint16_t format_version = 0;
  /// When recording started, CLOCK_REALTIME ns.
  int64_t created_ns = 0;
  /// Requested sampling interval.
  int64_t interval_ns = 0;
  std::string hostname;
  std::string driver_version;
  /// The command being recorded ("" when none) and the vramscope version that wrote the file.
  std::string command;
  std::string writer_version;
};

/// How a RecordingWriter creates and syncs its file.
struct RecordingWriterOptions {
  /// Replace an existing file instead of refusing to. A new file is renamed over the old name,
  /// so a symlink there is replaced, never followed.
  bool overwrite = false;
  /// fdatasync after every chunk, so a power loss loses at most the chunk being written.
  /// Without it only a crash of vramscope itself is survived (the kernel still has the data).
  bool sync_each_chunk = true;
};

/// Appends samples to a new recording file (created 0600, refuses to overwrite unless asked).
/// Not thread-safe: one thread appends and flushes.
class RecordingWriter {
 public:
  /// Creates `path`; throws vramscope::Error with a clear message on failure.
  static std::unique_ptr<RecordingWriter> create(const std::string& path,
                                                 const RecordingMetadata& metadata,
                                                 bool overwrite = false);
  /// Same, with every option spelled out.
  static std::unique_ptr<RecordingWriter> create(const std::string& path,
                                                 const RecordingMetadata& metadata,
                                                 const RecordingWriterOptions& options);
  virtual ~RecordingWriter() = default;
  /// Buffers one sample; it reaches the file at the next flush().
  virtual void append(const SystemSample& sample) = 0;
  /// Writes buffered samples as one checksummed chunk (no-op when nothing is buffered).
  virtual void flush() = 0;
  /// Flushes and closes; also done by the destructor.
  virtual void close() = 0;
  /// Samples appended and bytes written to the file so far.
  virtual uint64_t sample_count() const = 0;
  virtual uint64_t file_bytes() const = 0;
};

/// How a recording ended.
enum class TailState {
  /// Every byte belonged to a valid chunk.
  Clean,
  /// The last chunk was cut short (recorder killed mid-write); earlier chunks were read.
  Truncated,
  /// A chunk failed its checksum or was malformed; reading stopped before it.
  Corrupt,
};

/// Reads a recording, validating everything it reads.
class RecordingReader {
 public:
  /// Opens and validates the header; throws vramscope::Error for a missing, foreign or
  /// unsupported-version file (the message says which). A path that names no regular file
  /// (missing, a directory, a FIFO, a device, a symlink loop) fails with ExitError without
  /// blocking, as a file that is not a readable recording does.
  static std::unique_ptr<RecordingReader> open(const std::string& path);
  /// Reads a recording held in memory (tests, fuzzing); `name` stands for the path in messages.
  static std::unique_ptr<RecordingReader> open_bytes(std::string bytes,
                                                     const std::string& name = "<memory>");
  virtual ~RecordingReader() = default;
  virtual const RecordingMetadata& metadata() const = 0;
  /// Reads the next sample; false at the end of valid data (check tail_state() then).
  virtual bool next(SystemSample& out) = 0;
  virtual TailState tail_state() const = 0;
  /// One line describing a non-clean tail, e.g. "torn chunk at byte 81920 (recorder killed?)".
  virtual std::string tail_message() const = 0;
};

}  // namespace vramscope
