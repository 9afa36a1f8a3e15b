// src/format/include/vramscope/format/recording_layout.hpp -- the on-disk layout of a recording file, drawn and asserted
//
// A recording is one header followed by append-only chunks. Every multi-byte field is
// little-endian; the structs below are copied to and from the file with memcpy, which the
// static_asserts make safe (no padding, fixed sizes, little-endian host).
//
//  File header (written and fdatasync'ed once, at create):
//  ┌──────────┬─────────┬─────────┬──────────────┬──────────────────────────┬──────────────┐
//  │ magic[8] │ version │ flags   │ header_bytes │ metadata                 │ header_crc   │
//  │ VRAMSCOP │ u16 = 3 │ u16 = 0 │ u32          │ header_bytes - 20 bytes  │ u32          │
//  └──────────┴─────────┴─────────┴──────────────┴──────────────────────────┴──────────────┘
//  header_crc = masked CRC-32C of every header byte before it.
//
//  Chunk (one per RecordingWriter::flush(), written with a single write()):
//  ┌──────────┬───────────────┬──────────────┬─────────────┬──────────────┬─────────────┐
//  │ magic[4] │ payload_bytes │ sample_count │ payload_crc │ first_ts_ns  │ last_ts_ns  │ ...
//  │ VSCK     │ u32           │ u32          │ u32         │ i64          │ i64         │
//  └──────────┴───────────────┴──────────────┴─────────────┴──────────────┴─────────────┘
//       ┌──────────┬──────────────┬──────────────────────────────────────────────┐
//   ... │ flags    │ header_crc   │ payload: sample_count × (varint length, sample)│
//       │ u32 = 0  │ u32          │ payload_bytes bytes (see sample_codec.hpp)     │
//       └──────────┴──────────────┴──────────────────────────────────────────────┘
//  header_crc covers the 36 chunk-header bytes before it, payload_crc the payload; both masked.
//  Versions 1 and 2 hold only these raw chunks.
//
//  Packed chunk (version 3 on, the only chunk it holds; written by src/format/packed_chunk.cpp):
//  ┌────────┬──────────────┬───────────┬──────────────┬──────────────┬─────────────┬───────────┐
//  │ marker │ stored_bytes │ raw_bytes │ sample_count │ header_check │ payload_crc │ zstd data │
//  │ u8     │ varint       │ varint    │ varint       │ u16          │ u32         │ stored_   │
//  │ K or C │              │           │              │              │             │ bytes     │
//  └────────┴──────────────┴───────────┴──────────────┴──────────────┴─────────────┴───────────┘
//  The zstd data expands to exactly raw_bytes of samples, encoded like a raw chunk's payload:
//  sample_count × (varint length, sample). header_check is the low 16 bits of the masked CRC-32C
//  of the header bytes before it, payload_crc the masked CRC-32C of the zstd data.
//  Marker 'K' (key chunk): the chunk opens a new zstd frame, the string table starts empty and
//  its first sample's timestamp is stored whole (base 0). Marker 'C': the chunk continues the
//  frame of the chunks before it (the writer flushes the stream at every chunk, so each decodes
//  as soon as it is read), keeps the string table and the timestamp bases. Each sample's
//  timestamp is coded against the previous one plus the previous step (TimestampPredictor in
//  packed_chunk.hpp; the second sample after a key chunk against the first). The first chunk is a
//  key chunk, and the writer opens another once 4 MiB of samples have gone out, so a reader may
//  start at any key chunk. The header is this small because `vramscope record` writes a chunk per
//  100 ms: one sample that resembles the ones before takes ~10 bytes of zstd data, where a raw
//  chunk took 40 bytes of header and ~200 of payload.
//
//  Index chunk (version 3; written by src/format/recording_index.cpp):
//  ┌────────┬────────────┬──────────────┬──────────┬────────────┬─────────────┬──────────┐
//  │ marker │ body_bytes │ header_check │ body_crc │ body       │ chunk_bytes │ magic[4] │
//  │ 'I'    │ varint     │ u16          │ u32      │ body_bytes │ u32         │ VSIX     │
//  └────────┴────────────┴──────────────┴──────────┴────────────┴─────────────┴──────────┘
//  body, all varints: previous_index_offset (0 for the first), segment_offset (the key chunk the
//  segment starts at), sample_count, first_ts_ns and last_ts_ns (zigzag), digest_bytes, and when
//  digest_bytes > 0: the length of a zstd frame (content size declared) and the frame, holding
//  the writer's SegmentDigest bytes. chunk_bytes counts the whole chunk, trailer included.
//  A segment is a key chunk and the chunks that continue it; the writer ends each segment with
//  its index chunk, right before the next key chunk and at close. So the chunk just before a
//  key chunk (other than the first) is an index chunk, and a cleanly closed file ends with one:
//  a reader finds the last from the end (the trailer), walks back along previous_index_offset,
//  and learns every segment's offset, count, times and digest without decoding a sample. A
//  file that does not end with an index (still being written, killed) has its last index chunk
//  within one segment of the end. Readers of samples skip index chunks (after checking them).
//
// Because chunks are only appended, a torn write (SIGKILL, power loss) can damage only the last
// chunk: the reader returns every chunk before it and reports the tail as truncated or corrupt.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vramscope::format {

/// The format version this code writes and the newest it reads. Bump it on any layout change,
/// and keep a checked-in file of every older version that the tests read back.
/// Version 2 added flags and per-category bytes to step records (sample_codec.hpp).
/// Version 3 replaced raw chunks by packed (zstd) chunks; the sample encoding is version 2's.
/// Version 4 added the agent's settled driver breakdown to allocator records (sample_codec.hpp).
/// Version 5 added why a polling process polls to its allocator records (sample_codec.hpp).
inline constexpr uint16_t recording_version = 5;
/// The first version whose chunks are packed.
inline constexpr uint16_t first_packed_version = 3;

/// File magic: the first 8 bytes of every recording.
inline constexpr char file_magic[8] = {'V', 'R', 'A', 'M', 'S', 'C', 'O', 'P'};
/// Chunk magic: the first 4 bytes of every chunk.
inline constexpr char chunk_magic[4] = {'V', 'S', 'C', 'K'};
/// Packed chunk markers (version 3 on): the first byte of a key chunk, and of any other.
inline constexpr char packed_key_marker = 'K';
inline constexpr char packed_chunk_marker = 'C';
/// Index chunk marker (version 3 on).
inline constexpr char index_marker = 'I';

/// Largest header (fixed part + metadata + CRC) a reader accepts.
inline constexpr uint32_t max_header_bytes = 1U << 20U;
/// Largest chunk payload a reader accepts; the writer splits chunks well below it.
inline constexpr uint32_t max_chunk_payload_bytes = 64U << 20U;
/// The writer starts a new chunk once the pending payload reaches this size, even without flush().
inline constexpr uint32_t writer_chunk_payload_bytes = 4U << 20U;

/// The fixed start of the file.
struct FileHeader {
  /// Always file_magic.
  char magic[8];
  /// Format version; readers refuse versions newer than recording_version.
  uint16_t version;
  /// Feature bits; none are defined in version 1 and a reader refuses any it does not know.
  uint16_t flags;
  /// Bytes from the start of the file to the first chunk (fixed part, metadata and CRC).
  uint32_t header_bytes;
};
static_assert(sizeof(FileHeader) == 16);

/// Bytes of the whole header before the metadata, and after it (the CRC).
inline constexpr uint32_t file_header_fixed_bytes = sizeof(FileHeader);
inline constexpr uint32_t file_header_crc_bytes = 4;

/// The fixed start of every chunk.
struct ChunkHeader {
  /// Always chunk_magic.
  char magic[4];
  /// Bytes of payload that follow this header.
  uint32_t payload_bytes;
  /// Samples encoded in the payload (at least one).
  uint32_t sample_count;
  /// Masked CRC-32C of the payload.
  uint32_t payload_crc;
  /// Timestamps of the first and last sample (CLOCK_REALTIME ns), so a reader can skim times.
  int64_t first_timestamp_ns;
  int64_t last_timestamp_ns;
  /// Feature bits; none are defined in version 1.
  uint32_t flags;
  /// Masked CRC-32C of the 36 bytes above.
  uint32_t header_crc;
};
static_assert(sizeof(ChunkHeader) == 40);
static_assert(offsetof(ChunkHeader, header_crc) == 36);
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "recording structs are memcpy'd and the format is little-endian");

}  // namespace vramscope::format
