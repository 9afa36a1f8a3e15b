// src/format/include/vramscope/format/packed_chunk.hpp -- the zstd-compressed chunk of format version 3 (drawn in
// recording_layout.hpp): its header, the writer's compressor and the reader's bounded decompressor
//
// Kept apart from recording_reader.cpp/recording_writer.cpp so that the raw chunk of versions 1
// and 2 and the packed chunk of version 3 can each be read and changed on their own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace vramscope::format {

/// Most bytes a packed chunk header takes (marker, three 5-byte varints, check, CRC).
inline constexpr std::size_t max_packed_header_bytes = 1 + 3 * 5 + 2 + 4;

/// zstd window of a packed stream (log2 bytes): 4 MiB, thousands of samples back, far more than
/// the previous sample that a chunk mostly repeats; the reader refuses larger windows, which
/// bounds its memory.
inline constexpr int packed_window_log = 22;

/// The decoded fields of a packed chunk header.
struct PackedChunkHeader {
  /// Does the chunk start a new zstd frame, with the string table and the timestamp base
  /// starting afresh, so that a reader can begin here without reading anything before?
  bool key = false;
  /// Bytes of zstd data after the header.
  uint32_t stored_bytes = 0;
  /// Bytes of encoded samples that the zstd data expands to (sample_codec.hpp, no chunk header).
  uint32_t raw_bytes = 0;
  /// Samples in the chunk (at least one).
  uint32_t sample_count = 0;
  /// Masked CRC-32C of the stored (compressed) bytes.
  uint32_t payload_crc = 0;
  /// Bytes the header itself took.
  uint32_t header_bytes = 0;
};

/// The base each sample's timestamp is coded against in a packed stream: 0 for a key chunk's
/// first sample, the previous timestamp for its second, and from then on the previous one plus
/// the previous step (so a steady 100 ms interval codes as its jitter, not as 100 ms each time).
/// Writer and reader keep one each and feed it the same timestamps. Wrapping arithmetic, so
/// that any timestamps round-trip.
class TimestampPredictor {
 public:
  /// Starts afresh, at a key chunk.
  void restart() { *this = TimestampPredictor(); }
  /// The base for the next sample.
  int64_t base_ns() const {
    return static_cast<int64_t>(static_cast<uint64_t>(m_last_ns) +
                                static_cast<uint64_t>(m_step_ns));
  }
  /// Takes the timestamp of the sample just coded.
  void observe(int64_t timestamp_ns) {
    m_step_ns = m_seen == 0 ? 0
                            : static_cast<int64_t>(static_cast<uint64_t>(timestamp_ns) -
                                                   static_cast<uint64_t>(m_last_ns));
    m_last_ns = timestamp_ns;
    m_seen = m_seen < 2 ? m_seen + 1 : 2;
  }

 private:
  int64_t m_last_ns = 0;
  int64_t m_step_ns = 0;
  /// Samples observed since the restart, counted up to 2.
  int m_seen = 0;
};

/// What parse_packed_header() found.
enum class PackedHeaderStatus {
  /// A valid header; `out` is filled in.
  Ok,
  /// The bytes end inside the header (a torn write, if nothing follows in the file).
  Cut,
  /// Not a packed chunk header, or a damaged one; `why` says which.
  Bad,
};

/// Parses and verifies a packed chunk header at the front of `bytes` (which may hold more).
/// Every field is checked against the limits in recording_layout.hpp before it is trusted.
PackedHeaderStatus parse_packed_header(std::string_view bytes, PackedChunkHeader& out,
                                       std::string& why);

/// Compresses chunks for the writer: one zstd stream per key chunk, flushed at every chunk.
class PackedChunkCompressor {
 public:
  PackedChunkCompressor();
  ~PackedChunkCompressor();
  PackedChunkCompressor(const PackedChunkCompressor&) = delete;
  PackedChunkCompressor& operator=(const PackedChunkCompressor&) = delete;

  /// Appends one whole packed chunk (header and zstd data) holding `raw` (`sample_count`
  /// encoded samples) to `out`. A key chunk starts a new frame; any other continues the
  /// stream, so it is small when its samples resemble the ones before.
  void compress(std::string_view raw, uint32_t sample_count, bool key, std::string& out);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

/// Decompresses the chunks of one packed stream for the reader, with bounded memory: the
/// window is capped at packed_window_log and the output at the header's raw_bytes.
class PackedChunkDecompressor {
 public:
  PackedChunkDecompressor();
  ~PackedChunkDecompressor();
  PackedChunkDecompressor(const PackedChunkDecompressor&) = delete;
  PackedChunkDecompressor& operator=(const PackedChunkDecompressor&) = delete;

  /// Expands the stored bytes of the chunk that `header` describes into `raw` (resized to
  /// exactly header.raw_bytes). A key chunk restarts the stream first. Returns false, with
  /// `why` set, when the data is not a valid continuation or does not expand to exactly
  /// raw_bytes; the stream is then unusable until the next key chunk.
  bool decompress(const PackedChunkHeader& header, std::string_view stored, std::string& raw,
                  std::string& why);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace vramscope::format
