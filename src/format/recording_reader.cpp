// src/format/recording_reader.cpp -- validating, bounded-memory reader of recording files
//
// The reader holds one chunk payload at a time (at most max_chunk_payload_bytes) and decodes
// samples from it one by one. The file is read through a ByteSource's window, a block of 1 MiB
// (or one chunk, when larger) per pread, not a call per chunk header and payload. A chunk's
// checksums are verified before any of its samples are returned; the first chunk that is cut short
// or fails validation ends the data, and everything before it is still returned (the writer only
// ever appends, so earlier chunks are intact).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "vramscope/core/crc32c.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/format/byte_source.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_index.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/format/sample_codec.hpp"
#include "vramscope/format/varint.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

using format::ChunkHeader;
using format::FileHeader;

using format::ByteSource;

/// Chunks remembered for the duplicate check (about 80 bytes each): past this the memory is
/// started afresh, so a very long recording is checked in windows of this many chunks.
constexpr std::size_t max_remembered_chunks = 1U << 16U;

class RecordingReaderImpl final : public RecordingReader {
 public:
  RecordingReaderImpl(std::unique_ptr<ByteSource> source, std::string name)
      : m_source(std::move(source)), m_name(std::move(name)) {
    read_header();
  }

  const RecordingMetadata& metadata() const override { return m_metadata; }

  bool next(SystemSample& out) override {
    while (m_samples_left == 0) {
      if (m_finished || !load_chunk()) return false;
    }
    try {
      // The decoder bounds what the sample expands to as it goes (max_decoded_sample_bytes).
      m_decoder.decode(m_cursor, m_packed ? m_timestamps.base_ns() : m_previous_timestamp_ns, out);
      // A checksum says the bytes are what was written, not that a GPU could hold them.
      if (std::string why = implausible_bytes(out); !why.empty()) {
        throw format::FormatError("impossible value: " + why);
      }
      --m_samples_left;
      if (m_samples_left == 0) check_chunk_end(out);
    } catch (const format::FormatError& error) {
      return stop(TailState::Corrupt, "malformed chunk at byte " + std::to_string(m_chunk_offset) +
                                          ": " + error.what());
    }
    m_previous_timestamp_ns = out.timestamp_ns;
    m_timestamps.observe(out.timestamp_ns);
    return true;
  }

  std::vector<RecordingSegment> segments() override {
    if (!m_packed) return {};
    return format::read_index(
        [this](uint64_t offset, char* out, std::size_t size) {
          return m_source->read_at(offset, out, size);
        },
        m_source->size(), m_first_chunk_offset);
  }

  std::optional<std::string> read_digest(const RecordingSegment& segment) override {
    if (segment.digest_bytes == 0) return std::string();
    // Bounded before expanding: the sum over this reader, against the file's size.
    const uint64_t budget = format::max_digest_total_fixed_bytes +
                            format::max_digest_total_per_file_byte * m_source->size();
    if (segment.digest_bytes > format::max_digest_bytes ||
        segment.digest_frame_bytes > format::max_index_chunk_bytes ||
        segment.digest_bytes > budget - std::min(budget, m_digest_bytes_expanded)) {
      return std::nullopt;
    }
    m_digest_bytes_expanded += segment.digest_bytes;
    std::string frame(segment.digest_frame_bytes, '\0');
    if (m_source->read_at(segment.digest_frame_offset, frame.data(), frame.size()) !=
        frame.size()) {
      return std::nullopt;
    }
    return format::expand_digest(frame, segment.digest_bytes);
  }

  void seek(uint64_t offset) override {
    if (!m_packed) fail("seek needs a format-3 recording");
    // Everything about the stream starts afresh: the next chunk must be a key chunk.
    m_offset = offset;
    m_chunk_count = 0;
    m_samples_left = 0;
    m_finished = false;
    m_tail_state = TailState::Clean;
    m_tail_message.clear();
    m_unpacker.reset();
    m_chunk_offsets.clear();
    // The index chunk before `offset` is not read: the next one's back pointer is not checked,
    // except at the first chunk, where the next index chunk must say it is the first.
    m_last_index_offset = offset == m_first_chunk_offset ? 0 : unknown_index_offset;
  }

  TailState tail_state() const override { return m_tail_state; }
  std::string tail_message() const override { return m_tail_message; }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(m_name + ": " + why); }

  void read_header() {
    const uint64_t file_size = m_source->size();
    if (file_size == 0) fail("empty file, not a vramscope recording (recorder killed at start?)");
    FileHeader fixed{};
    const std::size_t got = m_source->read_at(0, reinterpret_cast<char*>(&fixed), sizeof fixed);
    if (got < sizeof fixed.magic ||
        std::memcmp(fixed.magic, format::file_magic, sizeof fixed.magic) != 0) {
      fail("not a vramscope recording");
    }
    if (got < sizeof fixed) fail("recording header is cut short");
    if (fixed.version > format::recording_version) {
      fail("written by a newer vramscope (format v" + std::to_string(fixed.version) +
           "); this one reads up to v" + std::to_string(format::recording_version));
    }
    if (fixed.version == 0) fail("invalid recording format version 0");
    if (fixed.header_bytes < format::file_header_fixed_bytes + format::file_header_crc_bytes ||
        fixed.header_bytes > format::max_header_bytes) {
      fail("corrupt recording header (implausible length " + std::to_string(fixed.header_bytes) +
           ")");
    }
    std::string header(fixed.header_bytes, '\0');
    if (m_source->read_at(0, header.data(), header.size()) < header.size()) {
      fail("recording header is cut short");
    }
    const std::size_t crc_at = header.size() - format::file_header_crc_bytes;
    uint32_t stored_crc = 0;
    std::memcpy(&stored_crc, header.data() + crc_at, sizeof stored_crc);
    if (crc32c_unmask(stored_crc) != crc32c(header.data(), crc_at)) {
      fail("corrupt recording header (checksum mismatch)");
    }
    // Checked after the CRC: with a valid CRC, unknown flags mean a feature, not damage.
    if (fixed.flags != 0) {
      fail("uses format features this vramscope does not know (flags 0x" + to_hex(fixed.flags) +
           ")");
    }
    try {
      m_metadata = format::decode_metadata(
          std::string_view(header).substr(sizeof fixed, crc_at - sizeof fixed));
    } catch (const format::FormatError& error) {
      fail(std::string("corrupt recording metadata: ") + error.what());
    }
    m_metadata.format_version = fixed.version;
    // Samples are decoded the way the file's version encoded them.
    m_decoder = format::SampleDecoder(fixed.version);
    m_packed = fixed.version >= format::first_packed_version;
    m_offset = fixed.header_bytes;
    m_first_chunk_offset = fixed.header_bytes;
  }

  /// Identifies a chunk: no writer produces two chunks with the same first and last timestamps
  /// and the same payload checksum.
  static std::tuple<int64_t, int64_t, uint32_t, uint32_t> chunk_key(const ChunkHeader& header) {
    return {header.first_timestamp_ns, header.last_timestamp_ns, header.payload_crc,
            header.payload_bytes};
  }

  static std::string to_hex(uint32_t value) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "%x", value);
    return buffer;
  }

  /// Reads and verifies the chunk at m_offset. False at the end of the valid data.
  bool load_chunk() {
    m_chunk_offset = m_offset;
    if (m_packed) return load_packed_chunk();
    ChunkHeader header{};
    const std::string_view head = m_source->view(m_offset, sizeof header);
    if (head.empty()) return stop(TailState::Clean, "");
    if (head.size() < sizeof header) return stop_torn();
    std::memcpy(&header, head.data(), sizeof header);
    if (std::memcmp(header.magic, format::chunk_magic, sizeof header.magic) != 0) {
      return stop_corrupt("no chunk marker");
    }
    if (crc32c_unmask(header.header_crc) != crc32c(&header, offsetof(ChunkHeader, header_crc))) {
      return stop_corrupt("chunk header checksum mismatch");
    }
    if (header.flags != 0) return stop_corrupt("unknown chunk flags");
    if (header.payload_bytes > format::max_chunk_payload_bytes) {
      return stop_corrupt("implausible chunk size " + std::to_string(header.payload_bytes));
    }
    if (header.sample_count == 0 || header.sample_count > header.payload_bytes) {
      return stop_corrupt("implausible sample count " + std::to_string(header.sample_count));
    }
    const uint64_t payload_at = m_offset + sizeof header;
    const std::string_view payload = m_source->view(payload_at, header.payload_bytes);
    if (payload.size() < header.payload_bytes) return stop_torn();
    if (crc32c_unmask(header.payload_crc) != crc32c(payload.data(), payload.size())) {
      return stop_corrupt("payload checksum mismatch");
    }
    if (const auto [earlier, fresh] = m_chunk_offsets.emplace(chunk_key(header), m_offset);
        !fresh) {
      // Each chunk is checksummed, so appended copies of one pass every other check and would
      // replay old samples with time going backwards.
      return stop_corrupt("repeats the chunk at byte " + std::to_string(earlier->second) +
                          " (copied or appended twice?)");
    }
    if (m_chunk_offsets.size() > max_remembered_chunks) m_chunk_offsets.clear();
    m_header = header;
    // Copied: the samples are decoded over later calls, and the source's view lasts one call.
    m_payload.assign(payload);
    m_cursor = m_payload;
    m_samples_left = header.sample_count;
    m_previous_timestamp_ns = header.first_timestamp_ns;
    m_offset = payload_at + header.payload_bytes;
    return true;
  }

  /// Reads, verifies and expands the packed chunk (version 3) at m_offset. False at the end of
  /// the valid data. A key chunk restarts the string table and the timestamp base; any other
  /// continues them from the chunk before.
  bool load_packed_chunk() {
    const std::string_view head = m_source->view(m_offset, format::max_packed_header_bytes);
    if (head.empty()) return stop(TailState::Clean, "");
    if (head[0] == format::index_marker) return skip_index_chunk();
    format::PackedChunkHeader header;
    std::string why;
    switch (format::parse_packed_header(head, header, why)) {
      case format::PackedHeaderStatus::Cut:
        return stop_torn();
      case format::PackedHeaderStatus::Bad:
        return stop_corrupt(why);
      case format::PackedHeaderStatus::Ok:
        break;
    }
    if (m_chunk_count == 0 && !header.key) {
      return stop_corrupt(m_offset == m_first_chunk_offset
                              ? "first chunk is not a key chunk"
                              : "segment does not start with a key chunk");
    }
    const uint64_t stored_at = m_offset + header.header_bytes;
    // Decompressed straight from the source's window: no copy of the stored bytes.
    const std::string_view stored = m_source->view(stored_at, header.stored_bytes);
    if (stored.size() < header.stored_bytes) return stop_torn();
    if (crc32c_unmask(header.payload_crc) != crc32c(stored.data(), stored.size())) {
      return stop_corrupt("payload checksum mismatch");
    }
    if (header.key) {
      // A key chunk is self-contained, so an appended copy would decode and replay old samples;
      // two honest key chunks never match (continuation chunks may: a steady stream repeats).
      const auto key = std::make_tuple(int64_t{header.payload_crc}, int64_t{header.stored_bytes},
                                       header.raw_bytes, header.sample_count);
      if (const auto [earlier, fresh] = m_chunk_offsets.emplace(key, m_offset); !fresh) {
        return stop_corrupt("repeats the chunk at byte " + std::to_string(earlier->second) +
                            " (copied or appended twice?)");
      }
      if (m_chunk_offsets.size() > max_remembered_chunks) m_chunk_offsets.clear();
      m_segment_offset = m_offset;
      m_segment_samples = 0;
    }
    m_segment_samples += header.sample_count;
    if (!m_unpacker) m_unpacker = std::make_unique<format::PackedChunkDecompressor>();
    if (!m_unpacker->decompress(header, stored, m_payload, why)) return stop_corrupt(why);
    if (header.key) {
      m_decoder = format::SampleDecoder(m_metadata.format_version);
      m_timestamps.restart();
    }
    ++m_chunk_count;
    m_cursor = m_payload;
    m_samples_left = header.sample_count;
    m_offset = stored_at + header.stored_bytes;
    return true;
  }

  /// Checks the index chunk at m_offset and moves past it (it holds no samples); loads the next
  /// chunk. An index chunk must end a segment: it may not come first.
  bool skip_index_chunk() {
    if (m_chunk_count == 0) return stop_corrupt("index chunk before any key chunk");
    // Only the bytes its header claims (at most ~4 MiB): reading the most an index chunk may take
    // for every one made a file of many small segments quadratic to read.
    const std::string_view head = m_source->view(m_offset, 1 + 10);
    std::size_t at = 1;
    uint64_t body_bytes = 0;
    std::size_t size = head.size();  // a malformed header: parse_index_chunk() says what is wrong
    if (format::get_varint(head, at, body_bytes) == format::VarintRead::Ok &&
        body_bytes <= format::max_index_chunk_bytes) {
      size = static_cast<std::size_t>(at + 6 + body_bytes + format::index_trailer_bytes);
    }
    std::string why;
    bool cut = false;
    const auto chunk =
        format::parse_index_chunk(m_source->view(m_offset, size), m_offset, why, &cut);
    if (!chunk) return cut ? stop_torn() : stop_corrupt(why);
    // Bound to its place: it describes the segment just read and points at the index before.
    if (chunk->segment.offset != m_segment_offset ||
        chunk->segment.sample_count != m_segment_samples ||
        (m_last_index_offset != unknown_index_offset &&
         chunk->previous_offset != m_last_index_offset)) {
      return stop_corrupt("index chunk does not describe the segment before it");
    }
    m_last_index_offset = m_offset;
    m_offset += chunk->chunk_bytes;
    m_chunk_offset = m_offset;
    m_chunk_count = 0;  // the next chunk opens a segment: a key chunk
    return load_packed_chunk();
  }

  /// After a chunk's last sample: the payload must be used up and the timestamps must agree
  /// (packed chunks carry no timestamps in their header).
  void check_chunk_end(const SystemSample& last) const {
    if (!m_cursor.empty()) throw format::FormatError("bytes left after the last sample");
    if (!m_packed && last.timestamp_ns != m_header.last_timestamp_ns) {
      throw format::FormatError("last timestamp disagrees with the chunk header");
    }
  }

  bool stop_torn() {
    return stop(TailState::Truncated, "torn chunk at byte " + std::to_string(m_chunk_offset) +
                                          " (recorder killed while writing?)");
  }

  bool stop_corrupt(const std::string& why) {
    return stop(TailState::Corrupt,
                "corrupt chunk at byte " + std::to_string(m_chunk_offset) + ": " + why);
  }

  bool stop(TailState state, std::string message) {
    m_finished = true;
    m_samples_left = 0;
    m_tail_state = state;
    m_tail_message = std::move(message);
    m_payload.clear();
    m_payload.shrink_to_fit();
    m_unpacker.reset();
    m_cursor = {};
    return false;
  }

  std::unique_ptr<ByteSource> m_source;
  std::string m_name;
  RecordingMetadata m_metadata;
  format::SampleDecoder m_decoder;
  /// Offset of the next chunk, and of the chunk being read (for messages).
  uint64_t m_offset = 0;
  uint64_t m_chunk_offset = 0;
  ChunkHeader m_header{};
  std::string m_payload;
  /// Undecoded rest of m_payload.
  std::string_view m_cursor;
  uint32_t m_samples_left = 0;
  int64_t m_previous_timestamp_ns = 0;
  /// Chunks read so far (chunk_key -> offset), to refuse a chunk that repeats one.
  std::map<std::tuple<int64_t, int64_t, uint32_t, uint32_t>, uint64_t> m_chunk_offsets;
  bool m_finished = false;
  /// Are the chunks packed (format version 3 on)?
  bool m_packed = false;
  /// Packed chunks read so far, and the decompressor (made at the first packed chunk).
  uint64_t m_chunk_count = 0;
  /// Offset of the first chunk (the end of the file header).
  uint64_t m_first_chunk_offset = 0;
  /// The current segment's key chunk and samples so far, and the last index chunk read (0:
  /// none; unknown_index_offset after a seek), which the next index chunk must match.
  static constexpr uint64_t unknown_index_offset = UINT64_MAX;
  uint64_t m_segment_offset = 0;
  uint64_t m_segment_samples = 0;
  uint64_t m_last_index_offset = 0;
  std::unique_ptr<format::PackedChunkDecompressor> m_unpacker;
  /// Digest bytes read_digest() expanded so far (bounded against the file's size).
  uint64_t m_digest_bytes_expanded = 0;
  /// Bases of packed sample timestamps, mirroring the writer's.
  format::TimestampPredictor m_timestamps;
  TailState m_tail_state = TailState::Clean;
  std::string m_tail_message;
};

}  // namespace

namespace {

/// What a file that is not a regular file is, for the message that refuses it.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::unique_ptr<RecordingReader> RecordingReader::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It has no
  // effect on the regular files that pass the check below. A path that names no readable
  // regular file is an error (ExitError, as for any file that cannot be read), the same in
  // every command.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    throw Error(path + ": cannot open recording: " +
                    (error == ELOOP ? "too many levels of symbolic links" : errno_text(error)),
                ExitError);
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const mode_t mode = info.st_mode;
    ::close(fd);
    throw Error(path + ": cannot read recording: " + file_kind(mode) +
                    ", not a recording file (give the .vsrec file `vramscope record` wrote)",
                ExitError);
  }
  return std::make_unique<RecordingReaderImpl>(ByteSource::file(path, fd), path);
}

std::unique_ptr<RecordingReader> RecordingReader::open_bytes(std::string bytes,
                                                             const std::string& name) {
  return std::make_unique<RecordingReaderImpl>(ByteSource::memory(std::move(bytes)), name);
}

}  // namespace vramscope
