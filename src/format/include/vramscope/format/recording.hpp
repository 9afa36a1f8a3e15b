// src/format/include/vramscope/format/recording.hpp -- crash-safe recording files: writer and validating reader
//
// The on-disk layout is specified in docs/recording-format.md and drawn in src/format/.
// Contract: append-only checksummed chunks; after SIGKILL or power loss everything up to the last
// flushed chunk reads back, and a torn or corrupt tail is reported, never fatal.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

/// Folds the samples of one segment of a recording (from one key chunk to the next) into bytes
/// that the writer stores in the segment's index chunk, so that a reader that trusts the file
/// can summarise the segment without decoding it. Nothing checks a digest against its samples
/// short of reading them, so `vramscope show` does not use them. The format does not interpret
/// them; report::SummaryDigest is the one `vramscope record` uses.
class SegmentDigest {
 public:
  virtual ~SegmentDigest() = default;
  /// Folds in one sample of the current segment.
  virtual void add(const SystemSample& sample) = 0;
  /// The digest of the samples added since the last take(); starts the next segment afresh.
  virtual std::string take() = 0;
};

/// How long `vramscope record` keeps a chunk open: it is closed (one write(), then fdatasync)
/// before a sample would be taken this long after the chunk's first, so every sample is on disk
/// within a second of being taken and a crash (SIGKILL, power loss) loses at most the last
/// second. At 100 ms a chunk holds 10 samples, at 1 ms 1,000 (the writer also closes one at
/// writer_chunk_payload_bytes of encoded samples): a reader pays a chunk's header, checksum
/// and zstd call once per second of samples, not once per sample.
inline constexpr int64_t record_chunk_window_ns = 1'000'000'000;

/// How a RecordingWriter creates and syncs its file.
struct RecordingWriterOptions {
  /// Replace an existing file instead of refusing to. A new file is renamed over the old name,
  /// so a symlink there is replaced, never followed.
  bool overwrite = false;
  /// fdatasync after every chunk, so a power loss loses at most the chunk being written.
  /// Without it only a crash of vramscope itself is survived (the kernel still has the data).
  bool sync_each_chunk = true;
  /// Digest stored with each segment in its index chunk (none when null: the index then holds
  /// offsets, counts and times only).
  std::shared_ptr<SegmentDigest> digest;
  /// Encoded sample bytes per segment: past them the writer ends the segment with an index
  /// chunk and starts the next with a key chunk. Larger segments compress a little better and
  /// index fewer entries; smaller ones leave less to decode after the last index (a recording
  /// still being written, or killed): 64 MiB is about 7 hours of one GPU at 100 ms.
  uint64_t segment_bytes = 64U << 20U;
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

/// One segment of a recording as its index chunk describes it (format version 3 on).
struct RecordingSegment {
  /// File offset of the segment's key chunk; a reader can seek() there.
  uint64_t offset = 0;
  /// File offset just past the segment's index chunk (the next segment's key chunk).
  uint64_t end_offset = 0;
  uint64_t sample_count = 0;
  /// Timestamps of the segment's first and last sample (CLOCK_REALTIME ns).
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  /// What the writer's SegmentDigest made of the segment ("" when it had none). Only the writer
  /// fills it: a reader's segments() leaves it empty and says where the digest lies instead, so
  /// that no digest is expanded before it is used (RecordingReader::read_digest()).
  std::string digest;
  /// Size of the digest once expanded (0: none), and where its zstd frame lies in the file.
  uint64_t digest_bytes = 0;
  uint64_t digest_frame_offset = 0;
  uint32_t digest_frame_bytes = 0;
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
  /// The segments the file's index describes, in file order, found from the end of the file
  /// without reading the samples. Empty when there is no usable index (versions 1 and 2, a
  /// recording killed before its first index chunk, or an index that fails validation): then
  /// the samples must be read. Samples after the last indexed segment are not described.
  virtual std::vector<RecordingSegment> segments() = 0;
  /// The digest of a segment from segments(), expanded; nullopt when it is damaged, or when the
  /// digests read from this file would together exceed 64 MiB plus 16 times the file's size (a
  /// few hundred compressed bytes may declare 16 MiB: the total is bounded before expanding).
  /// The digest says what its writer claimed: nothing here checks it against the samples.
  virtual std::optional<std::string> read_digest(const RecordingSegment& segment) = 0;
  /// Continues reading at `offset`, which must be a segment's offset or end_offset from
  /// segments(); the tail state starts afresh. Chunks before it are not read or checked. At the
  /// first segment's offset the reader is as freshly opened (the first index chunk must say it
  /// is the first).
  virtual void seek(uint64_t offset) = 0;
};

}  // namespace vramscope
