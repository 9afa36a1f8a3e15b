// tests/fuzz/fuzz_packed_chunk.cpp -- libFuzzer target: packed chunks behind the checksums
//
// Random bytes rarely pass a packed chunk's header check and CRC, so the reader target seldom
// reaches zstd with damaged data. This target takes the input as a packed stream whose checks
// matched (a buggy or hostile writer):
//   raw_bytes (u16) then pieces, each a u16 length and that many bytes of zstd data
// The first piece is a key chunk and the rest continue it; every piece is expanded by
// PackedChunkDecompressor and what it yields is decoded as samples. The input as a whole also goes
// through parse_packed_header() and parse_index_chunk(). Nothing may crash, and nothing may expand
// past raw_bytes + 1
// (-rss_limit_mb enforces that a crafted frame cannot make the decoder allocate without bound).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording_index.hpp"
#include "vramscope/format/sample_codec.hpp"

namespace {

uint16_t take_u16(std::string_view& bytes) {
  uint16_t value = 0;
  const std::size_t n = bytes.size() < 2 ? bytes.size() : 2;
  std::memcpy(&value, bytes.data(), n);
  bytes.remove_prefix(n);
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vramscope::format;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  {
    PackedChunkHeader header;
    std::string why;
    if (parse_packed_header(bytes, header, why) == PackedHeaderStatus::Ok &&
        (header.header_bytes > bytes.size() || header.sample_count == 0)) {
      __builtin_trap();  // an accepted header lies inside the bytes and holds a sample
    }
    bool cut = false;
    const auto index = parse_index_chunk(bytes, 1U << 30U, why, &cut);
    if (index &&
        (index->chunk_bytes > bytes.size() || index->segment.digest.size() > max_digest_bytes)) {
      __builtin_trap();  // an accepted index chunk lies inside the bytes, its digest bounded
    }
  }
  const uint32_t raw_bytes = take_u16(bytes) + 1U;
  PackedChunkDecompressor decompressor;
  SampleDecoder decoder;
  std::string raw;
  std::string why;
  int64_t base_ns = 0;
  for (bool key = true; !bytes.empty(); key = false) {
    const std::size_t length = std::min<std::size_t>(take_u16(bytes), bytes.size());
    PackedChunkHeader header;
    header.key = key;
    header.stored_bytes = static_cast<uint32_t>(length);
    header.raw_bytes = raw_bytes;
    header.sample_count = 1;
    const std::string_view stored = bytes.substr(0, length);
    bytes.remove_prefix(length);
    if (!decompressor.decompress(header, stored, raw, why)) {
      if (raw.size() > raw_bytes + 1U) __builtin_trap();
      continue;  // broken until the next key chunk, which this loop never gives: all refused
    }
    if (raw.size() != raw_bytes) __builtin_trap();
    std::string_view samples = raw;
    try {
      vramscope::SystemSample sample;
      while (!samples.empty()) {
        decoder.decode(samples, base_ns, sample);
        base_ns = sample.timestamp_ns;
      }
    } catch (const FormatError&) {
      // Malformed samples inside valid zstd data, rejected as they must be.
    }
  }
  return 0;
}
