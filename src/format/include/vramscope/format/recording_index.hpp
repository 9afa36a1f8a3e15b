// src/format/include/vramscope/format/recording_index.hpp -- index chunks of format version 3 (drawn in
// recording_layout.hpp): encoding, verification, and finding them from the end of the file
//
// The writer closes every segment (a key chunk and the chunks that continue it) with an index
// chunk that points back at the one before, and ends with a trailer, so a reader finds the last
// one from the end of the file and walks back: a few reads for a recording of any length,
// instead of decoding every sample.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/format/recording.hpp"

namespace vramscope::format {

/// Index chunk trailer magic: the last 4 bytes of every index chunk.
inline constexpr char index_trailer_magic[4] = {'V', 'S', 'I', 'X'};
/// Bytes of the trailer (chunk_bytes u32, magic).
inline constexpr std::size_t index_trailer_bytes = 8;
/// Largest index chunk a reader accepts, and largest digest (expanded) in one.
inline constexpr uint32_t max_index_chunk_bytes = 4U << 20U;
inline constexpr uint32_t max_digest_bytes = 16U << 20U;
/// How far back from the end of the file a reader looks for the last index chunk when the file
/// does not end with one (still being written, or killed): a segment's worth of packed chunks.
inline constexpr uint64_t max_index_search_bytes = 96U << 20U;

/// One decoded index chunk.
struct IndexChunk {
  /// Where the chunk starts and how many bytes it takes (trailer included).
  uint64_t offset = 0;
  uint32_t chunk_bytes = 0;
  /// Offset of the index chunk before (0: this is the first).
  uint64_t previous_offset = 0;
  /// The segment it closes.
  RecordingSegment segment;
};

/// Appends the index chunk for `segment` (whose end_offset is ignored: the chunk is written at
/// `offset`, right after the segment's last chunk) to `out`. The digest is stored compressed.
void encode_index_chunk(const RecordingSegment& segment, uint64_t previous_offset,
                        std::string& out);

/// Verifies and decodes the index chunk at the front of `bytes`, which was read at `offset`.
/// Nullopt (with `why`) when it is not a valid index chunk; `*cut` is set when `bytes` end
/// inside what would be one.
std::optional<IndexChunk> parse_index_chunk(std::string_view bytes, uint64_t offset,
                                            std::string& why, bool* cut);

/// Reads up to `size` bytes at `offset` into `out`; returns how many it read.
using ReadAt = std::function<std::size_t(uint64_t offset, char* out, std::size_t size)>;

/// The segments of a version-3 file of `file_size` bytes whose first chunk is at
/// `first_chunk_offset`, in file order, from its index chunks. Empty when there is no index or
/// any part of it fails validation (offsets must step back strictly, segments must tile the
/// file from the first chunk on), so that a caller falls back to reading every sample.
std::vector<RecordingSegment> read_index(const ReadAt& read_at, uint64_t file_size,
                                         uint64_t first_chunk_offset);

}  // namespace vramscope::format
