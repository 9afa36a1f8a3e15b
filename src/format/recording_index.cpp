// src/format/recording_index.cpp -- index chunks: encode, verify, find from the end, walk back
#include "vramscope/format/recording_index.hpp"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "vramscope/core/crc32c.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/format/varint.hpp"

namespace vramscope::format {
namespace {

/// The index reads every varint as 64 bits; any malformed one makes the chunk invalid.
bool read_varint(std::string_view bytes, std::size_t& at, uint64_t& out) {
  return get_varint(bytes, at, out) == VarintRead::Ok;
}

}  // namespace

void encode_index_chunk(const RecordingSegment& segment, uint64_t previous_offset,
                        std::string& out) {
  std::string body;
  put_varint(body, previous_offset);
  put_varint(body, segment.offset);
  put_varint(body, segment.sample_count);
  put_varint(body, zigzag(segment.first_ns));
  put_varint(body, zigzag(segment.last_ns));
  put_varint(body, segment.digest.size());
  if (!segment.digest.empty()) {
    std::string packed(ZSTD_compressBound(segment.digest.size()), '\0');
    const std::size_t size = ZSTD_compress(packed.data(), packed.size(), segment.digest.data(),
                                           segment.digest.size(), 3);
    packed.resize(ZSTD_isError(size) != 0 ? 0 : size);
    put_varint(body, packed.size());
    body += packed;
  }
  const std::size_t start = out.size();
  out.push_back(index_marker);
  put_varint(out, body.size());
  const uint16_t check = crc32c_check16(out.data() + start, out.size() - start);
  out.append(reinterpret_cast<const char*>(&check), sizeof check);
  const uint32_t crc = crc32c_mask(crc32c(body));
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  out += body;
  const auto chunk_bytes = static_cast<uint32_t>(out.size() - start + index_trailer_bytes);
  out.append(reinterpret_cast<const char*>(&chunk_bytes), sizeof chunk_bytes);
  out.append(index_trailer_magic, sizeof index_trailer_magic);
}

std::optional<IndexChunk> parse_index_chunk(std::string_view bytes, uint64_t offset,
                                            std::string& why, bool* cut) {
  *cut = false;
  if (bytes.empty()) {
    *cut = true;
    return std::nullopt;
  }
  if (bytes[0] != index_marker) {
    why = "no index chunk marker";
    return std::nullopt;
  }
  std::size_t at = 1;
  uint64_t body_bytes = 0;
  if (!read_varint(bytes, at, body_bytes)) {
    *cut = at >= bytes.size();
    why = "malformed index chunk header";
    return std::nullopt;
  }
  if (bytes.size() < at + 6) {
    *cut = true;
    return std::nullopt;
  }
  uint16_t check = 0;
  std::memcpy(&check, bytes.data() + at, sizeof check);
  if (check != crc32c_check16(bytes.data(), at)) {
    why = "index chunk header checksum mismatch";
    return std::nullopt;
  }
  uint32_t crc = 0;
  std::memcpy(&crc, bytes.data() + at + 2, sizeof crc);
  at += 6;
  if (body_bytes > max_index_chunk_bytes) {
    why = "implausible index chunk size " + std::to_string(body_bytes);
    return std::nullopt;
  }
  if (bytes.size() - at < body_bytes + index_trailer_bytes) {
    *cut = true;
    return std::nullopt;
  }
  const std::string_view body = bytes.substr(at, body_bytes);
  if (crc32c_unmask(crc) != crc32c(body)) {
    why = "index chunk checksum mismatch";
    return std::nullopt;
  }
  IndexChunk chunk;
  chunk.offset = offset;
  chunk.chunk_bytes = static_cast<uint32_t>(at + body_bytes + index_trailer_bytes);
  uint32_t trailer_bytes = 0;
  std::memcpy(&trailer_bytes, bytes.data() + at + body_bytes, sizeof trailer_bytes);
  if (trailer_bytes != chunk.chunk_bytes ||
      std::memcmp(bytes.data() + at + body_bytes + 4, index_trailer_magic, 4) != 0) {
    why = "index chunk trailer disagrees with its header";
    return std::nullopt;
  }
  std::size_t b = 0;
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t digest_bytes = 0;
  RecordingSegment& segment = chunk.segment;
  if (!read_varint(body, b, chunk.previous_offset) || !read_varint(body, b, segment.offset) ||
      !read_varint(body, b, segment.sample_count) || !read_varint(body, b, first) ||
      !read_varint(body, b, last) || !read_varint(body, b, digest_bytes)) {
    why = "malformed index chunk";
    return std::nullopt;
  }
  segment.first_ns = unzigzag(first);
  segment.last_ns = unzigzag(last);
  segment.end_offset = offset + chunk.chunk_bytes;
  if (segment.offset >= offset ||
      (chunk.previous_offset != 0 && chunk.previous_offset >= segment.offset) ||
      segment.sample_count == 0 || segment.sample_count > offset - segment.offset ||
      digest_bytes > max_digest_bytes) {
    why = "implausible index chunk fields";
    return std::nullopt;
  }
  if (digest_bytes > 0) {
    uint64_t packed_bytes = 0;
    if (!read_varint(body, b, packed_bytes) || packed_bytes != body.size() - b) {
      why = "malformed index chunk digest";
      return std::nullopt;
    }
    const std::string_view packed = body.substr(b);
    // Bounded: the frame must declare exactly the size the chunk says, at most 16 MiB.
    if (ZSTD_getFrameContentSize(packed.data(), packed.size()) != digest_bytes) {
      why = "index chunk digest sizes disagree";
      return std::nullopt;
    }
    segment.digest.resize(digest_bytes);
    const std::size_t size =
        ZSTD_decompress(segment.digest.data(), segment.digest.size(), packed.data(), packed.size());
    if (ZSTD_isError(size) != 0 || size != digest_bytes) {
      why = "index chunk digest is damaged";
      return std::nullopt;
    }
  } else if (b != body.size()) {
    why = "bytes left in index chunk";
    return std::nullopt;
  }
  return chunk;
}

namespace {

/// The index chunk that ends at `end` (its trailer's last byte is at end - 1), if valid.
std::optional<IndexChunk> index_ending_at(const ReadAt& read_at, uint64_t end,
                                          uint64_t first_chunk_offset) {
  if (end < first_chunk_offset + index_trailer_bytes) return std::nullopt;
  char trailer[index_trailer_bytes];
  if (read_at(end - index_trailer_bytes, trailer, sizeof trailer) != sizeof trailer)
    return std::nullopt;
  if (std::memcmp(trailer + 4, index_trailer_magic, 4) != 0) return std::nullopt;
  uint32_t chunk_bytes = 0;
  std::memcpy(&chunk_bytes, trailer, sizeof chunk_bytes);
  if (chunk_bytes < index_trailer_bytes + 8 || chunk_bytes > max_index_chunk_bytes + 64 ||
      chunk_bytes > end - first_chunk_offset) {
    return std::nullopt;
  }
  std::string bytes(chunk_bytes, '\0');
  const uint64_t start = end - chunk_bytes;
  if (read_at(start, bytes.data(), bytes.size()) != bytes.size()) return std::nullopt;
  std::string why;
  bool cut = false;
  auto chunk = parse_index_chunk(bytes, start, why, &cut);
  if (chunk && chunk->chunk_bytes != chunk_bytes) return std::nullopt;
  return chunk;
}

/// The last index chunk of the file: at its very end (closed cleanly), or else the last trailer
/// within max_index_search_bytes of the end (samples or a torn chunk after it).
std::optional<IndexChunk> find_last_index(const ReadAt& read_at, uint64_t file_size,
                                          uint64_t first_chunk_offset) {
  if (auto chunk = index_ending_at(read_at, file_size, first_chunk_offset)) return chunk;
  const uint64_t floor =
      std::max(first_chunk_offset,
               file_size > max_index_search_bytes ? file_size - max_index_search_bytes : 0);
  constexpr std::size_t block = 1U << 20U;
  std::string window;
  uint64_t window_end = file_size;
  while (window_end > floor) {
    const uint64_t window_start = window_end - std::min<uint64_t>(block, window_end - floor);
    // Keep 3 bytes of the block after this one, so a magic across the boundary is seen.
    window.resize(static_cast<std::size_t>(window_end - window_start));
    if (read_at(window_start, window.data(), window.size()) != window.size()) return std::nullopt;
    if (window_end < file_size) {
      char spill[3] = {};
      const std::size_t got = read_at(window_end, spill, sizeof spill);
      window.append(spill, got);
    }
    for (std::size_t i = window.size(); i >= 4; --i) {
      if (std::memcmp(window.data() + i - 4, index_trailer_magic, 4) != 0) continue;
      if (auto chunk = index_ending_at(read_at, window_start + i, first_chunk_offset)) return chunk;
    }
    window_end = window_start;
  }
  return std::nullopt;
}

}  // namespace

std::vector<RecordingSegment> read_index(const ReadAt& read_at, uint64_t file_size,
                                         uint64_t first_chunk_offset) {
  std::vector<RecordingSegment> segments;
  std::optional<IndexChunk> chunk = find_last_index(read_at, file_size, first_chunk_offset);
  // Each step goes strictly back, so the walk ends; the count bound is a second guard.
  const uint64_t max_steps = file_size / 16 + 1;
  while (chunk) {
    segments.push_back(chunk->segment);
    if (chunk->previous_offset == 0) break;
    if (segments.size() > max_steps) return {};
    const uint64_t previous_end = chunk->segment.offset;
    std::optional<IndexChunk> previous = index_ending_at(read_at, previous_end, first_chunk_offset);
    if (!previous || previous->offset != chunk->previous_offset) return {};
    chunk = std::move(previous);
  }
  if (segments.empty()) return {};
  std::reverse(segments.begin(), segments.end());
  // The segments must tile the file from its first chunk: nothing unindexed in between.
  uint64_t expected = first_chunk_offset;
  for (const RecordingSegment& segment : segments) {
    if (segment.offset != expected) return {};
    expected = segment.end_offset;
  }
  return segments;
}

}  // namespace vramscope::format
