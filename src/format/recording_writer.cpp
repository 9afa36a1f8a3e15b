// src/format/recording_writer.cpp -- appends checksummed chunks to a new recording file
//
// Crash safety rests on three habits: the header is on disk (fdatasync, plus the directory entry)
// before the first sample; each chunk goes out in one write() so a torn write can only damage
// the last chunk; and a failed write is cut back off the file (ftruncate) so the next chunk never
// lands after garbage. Chunks are packed (zstd, format version 3; see packed_chunk.hpp): a chunk
// that failed to write is kept and written again first, because the chunks after it continue
// its compressed stream.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

#include "vramscope/core/crc32c.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_index.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/format/sample_codec.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

using format::FileHeader;

/// Samples in one chunk at most (the header stores the count in 32 bits).
constexpr uint32_t max_chunk_samples = 1U << 20U;

/// Makes a new file's directory entry durable: without it, a power loss can lose the file itself.
void sync_parent_directory(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the file is already written and synced
  ::fsync(fd);
  ::close(fd);
}

class FileRecordingWriter final : public RecordingWriter {
 public:
  FileRecordingWriter(std::string path, int fd, const RecordingWriterOptions& options,
                      uint64_t header_bytes)
      : m_path(std::move(path)), m_fd(fd), m_options(options), m_file_bytes(header_bytes) {}

  ~FileRecordingWriter() override {
    try {
      close();
    } catch (const Error&) {
      // A destructor cannot report; callers who care call close() themselves.
    }
  }

  void append(const SystemSample& sample) override {
    if (m_fd < 0) throw Error(m_path + ": recording is already closed");
    if (m_pending.size() >= format::writer_chunk_payload_bytes ||
        m_pending_samples >= max_chunk_samples) {
      flush();
    }
    if (m_pending_samples == 0) {
      // A chunk's first sample settles whether it is a key chunk: a key chunk's samples are
      // encoded against an empty string table, and their timestamps against a fresh base.
      m_pending_key = m_chunks_sealed == 0 || m_bytes_since_key >= m_options.segment_bytes;
      if (m_pending_key) {
        m_encoder.emplace();
        m_timestamps.restart();
        // The segment before ends here; its index chunk goes out just before this key chunk.
        if (m_segment.sample_count > 0) end_segment();
      }
    }
    if (!m_encoder->encode(sample, m_timestamps.base_ns(), m_pending)) {
      throw Error(m_path + ": sample too large to record (over " +
                  std::to_string(format::SampleEncoder::max_sample_bytes >> 20U) + " MiB encoded)");
    }
    m_timestamps.observe(sample.timestamp_ns);
    ++m_pending_samples;
    ++m_sample_count;
    if (m_segment.sample_count == 0) m_segment.first_ns = sample.timestamp_ns;
    m_segment.last_ns = sample.timestamp_ns;
    ++m_segment.sample_count;
    if (m_options.digest) m_options.digest->add(sample);
  }

  void flush() override {
    if (m_pending_samples == 0 && m_sealed.empty()) return;
    if (m_fd < 0) throw Error(m_path + ": recording is already closed");
    if (m_broken) throw Error(m_path + ": recording stopped after an earlier write error");
    // A chunk that an earlier write could not place goes first: later chunks continue its
    // compressed stream and string table.
    if (!m_sealed.empty()) write_sealed();
    if (m_pending_samples > 0) {
      seal_chunk();
      write_sealed();
    }
    if (m_options.sync_each_chunk && ::fdatasync(m_fd) != 0) {
      throw Error(m_path + ": cannot sync recording to disk: " + errno_text(errno));
    }
  }

  void close() override {
    if (m_fd < 0) return;
    flush();
    // The last segment's index chunk ends the file, so a reader finds it at the very end.
    if (m_segment.sample_count > 0) {
      end_segment();
      seal_index();
      write_sealed();
    }
    const int fd = m_fd;
    m_fd = -1;
    const bool synced = m_options.sync_each_chunk || ::fdatasync(fd) == 0;
    const int sync_error = errno;
    if (::close(fd) != 0) throw Error(m_path + ": cannot close recording: " + errno_text(errno));
    if (!synced) throw Error(m_path + ": cannot sync recording to disk: " + errno_text(sync_error));
  }

  uint64_t sample_count() const override { return m_sample_count; }
  uint64_t file_bytes() const override { return m_file_bytes; }

 private:
  /// Moves the current segment to m_ended_segment, with its digest, for seal_index().
  void end_segment() {
    m_ended_segment = m_segment;
    if (m_options.digest) m_ended_segment->digest = m_options.digest->take();
    m_segment = RecordingSegment{};
  }

  /// Appends the index chunk of m_ended_segment (if any) to m_sealed.
  void seal_index() {
    if (!m_ended_segment) return;
    const uint64_t offset = m_file_bytes + m_sealed.size();
    format::encode_index_chunk(*m_ended_segment, m_last_index_offset, m_sealed);
    m_last_index_offset = offset;
    m_ended_segment.reset();
  }

  /// Compresses the pending samples into m_sealed, one packed chunk (packed_chunk.hpp); a key
  /// chunk comes after the index chunk of the segment it follows.
  void seal_chunk() {
    if (m_pending_key) {
      seal_index();
      m_segment.offset = m_file_bytes + m_sealed.size();
    }
    m_compressor.compress(m_pending, m_pending_samples, m_pending_key, m_sealed);
    m_bytes_since_key = (m_pending_key ? 0 : m_bytes_since_key) + m_pending.size();
    ++m_chunks_sealed;
    m_pending.clear();
    m_pending_samples = 0;
  }

  /// Writes m_sealed with one write(); on failure cuts it off the file again and keeps it.
  void write_sealed() {
    if (const int error = write_all(m_fd, m_sealed.data(), m_sealed.size()); error != 0) {
      // Cut the partial chunk off so a retry (or the reader) sees a clean end of file.
      if (::ftruncate(m_fd, static_cast<off_t>(m_file_bytes)) != 0 ||
          ::lseek(m_fd, static_cast<off_t>(m_file_bytes), SEEK_SET) < 0) {
        m_broken = true;
      }
      throw Error(m_path + ": cannot write recording: " + errno_text(error));
    }
    m_file_bytes += m_sealed.size();
    m_sealed.clear();
  }

  std::string m_path;
  int m_fd;
  RecordingWriterOptions m_options;
  /// Restarted (emplaced) at every key chunk, so that its string table starts empty there.
  std::optional<format::SampleEncoder> m_encoder;
  format::PackedChunkCompressor m_compressor;
  /// Encoded samples of the chunk being built, not yet compressed.
  std::string m_pending;
  uint32_t m_pending_samples = 0;
  /// Is the chunk being built a key chunk?
  bool m_pending_key = true;
  /// A sealed packed chunk not yet on disk (empty once written).
  std::string m_sealed;
  uint64_t m_chunks_sealed = 0;
  /// The segment being written (offset, count, times), and one that ended but whose index
  /// chunk is not sealed yet.
  RecordingSegment m_segment;
  std::optional<RecordingSegment> m_ended_segment;
  /// Offset of the last index chunk sealed (0: none yet).
  uint64_t m_last_index_offset = 0;
  /// Sample bytes sealed since the last key chunk began, to space key chunks.
  uint64_t m_bytes_since_key = 0;
  /// Bases of the sample timestamps, mirrored by the reader.
  format::TimestampPredictor m_timestamps;
  uint64_t m_sample_count = 0;
  uint64_t m_file_bytes;
  /// Did a failed write leave bytes we could not cut off? Then nothing more may be appended.
  bool m_broken = false;
};

std::string build_header(const RecordingMetadata& metadata) {
  const std::string encoded = format::encode_metadata(metadata);
  const auto header_bytes = static_cast<uint32_t>(format::file_header_fixed_bytes + encoded.size() +
                                                  format::file_header_crc_bytes);
  FileHeader fixed{};
  std::memcpy(fixed.magic, format::file_magic, sizeof fixed.magic);
  fixed.version = format::recording_version;
  fixed.flags = 0;
  fixed.header_bytes = header_bytes;
  std::string out(reinterpret_cast<const char*>(&fixed), sizeof fixed);
  out += encoded;
  const uint32_t crc = crc32c_mask(crc32c(out));
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return out;
}

}  // namespace

std::unique_ptr<RecordingWriter> RecordingWriter::create(const std::string& path,
                                                         const RecordingMetadata& metadata,
                                                         bool overwrite) {
  RecordingWriterOptions options;
  options.overwrite = overwrite;
  return create(path, metadata, options);
}

std::unique_ptr<RecordingWriter> RecordingWriter::create(const std::string& path,
                                                         const RecordingMetadata& metadata,
                                                         const RecordingWriterOptions& options) {
  const std::string header = build_header(metadata);
  // The name is never opened for writing when it exists. A new recording is created O_EXCL
  // (which never follows a symlink); an overwrite writes its header into a fresh temporary file
  // beside `path` and renames it over whatever is there, so a planted symlink is replaced, not
  // written through, and the file always starts 0600 with a complete header.
  std::string created = path;
  int fd = -1;
  if (options.overwrite) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode) && !S_ISLNK(info.st_mode)) {
      throw Error(path + ": not a regular file, cannot record into it");
    }
    const std::size_t slash = path.rfind('/');
    created = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + "." +
              path.substr(slash == std::string::npos ? 0 : slash + 1) + ".vramscope-XXXXXX";
    fd = ::mkostemp(created.data(), O_CLOEXEC);
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) {
      throw Error(path + ": already exists (choose another name, or overwrite it explicitly)");
    }
    throw Error(path + ": cannot create recording: " + errno_text(error));
  }
  int error = write_all(fd, header.data(), header.size());
  if (error == 0 && ::fdatasync(fd) != 0) error = errno;
  if (error == 0 && options.overwrite && ::rename(created.c_str(), path.c_str()) != 0) {
    error = errno;
  }
  if (error != 0) {
    ::close(fd);
    // Only the file this call created is removed; an existing one is left as it was.
    ::unlink(created.c_str());
    throw Error(path + ": cannot write recording header: " + errno_text(error));
  }
  sync_parent_directory(path);
  return std::make_unique<FileRecordingWriter>(path, fd, options, header.size());
}

}  // namespace vramscope
