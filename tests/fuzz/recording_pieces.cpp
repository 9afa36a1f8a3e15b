// tests/fuzz/recording_pieces.cpp -- splitting a recording at its chunks, structured mutations,
// and writing it back with valid checksums (see recording_pieces.hpp)
#include "recording_pieces.hpp"

#include <zstd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "vramscope/core/crc32c.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording_index.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/format/sample_codec.hpp"
#include "vramscope/format/varint.hpp"

namespace vramscope::fuzz {
namespace {

using format::get_varint;
using format::put_varint;
using format::VarintRead;

/// The fields of an index chunk's body, read without the reader's plausibility checks so that
/// any of them can be changed and written back. The digest stays as stored (its sizes and zstd
/// frame) unless a mutation asks for it: a 16 MiB digest is not expanded on every mutation.
struct IndexFields {
  uint64_t previous_offset = 0;
  uint64_t segment_offset = 0;
  uint64_t sample_count = 0;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  /// The body after the times: digest_bytes, and the zstd frame's length and bytes.
  std::string stored_digest;
};

std::optional<IndexFields> decode_index(std::string_view chunk) {
  std::size_t at = 1;
  uint64_t body_bytes = 0;
  if (chunk.empty() || chunk[0] != format::index_marker ||
      get_varint(chunk, at, body_bytes) != VarintRead::Ok || chunk.size() < at + 6 + body_bytes) {
    return std::nullopt;
  }
  const std::string_view body = chunk.substr(at + 6, body_bytes);
  std::size_t b = 0;
  IndexFields f;
  uint64_t first = 0;
  uint64_t last = 0;
  if (get_varint(body, b, f.previous_offset) != VarintRead::Ok ||
      get_varint(body, b, f.segment_offset) != VarintRead::Ok ||
      get_varint(body, b, f.sample_count) != VarintRead::Ok ||
      get_varint(body, b, first) != VarintRead::Ok || get_varint(body, b, last) != VarintRead::Ok) {
    return std::nullopt;
  }
  f.first_ns = format::unzigzag(first);
  f.last_ns = format::unzigzag(last);
  f.stored_digest = std::string(body.substr(b));
  return f;
}

/// The index chunk of `f`, framed as format::encode_index_chunk frames one (marker, length,
/// check, CRC, body, trailer) but with any field values.
std::string encode_index(const IndexFields& f) {
  std::string body;
  put_varint(body, f.previous_offset);
  put_varint(body, f.segment_offset);
  put_varint(body, f.sample_count);
  put_varint(body, format::zigzag(f.first_ns));
  put_varint(body, format::zigzag(f.last_ns));
  body += f.stored_digest;
  std::string out(1, format::index_marker);
  put_varint(out, body.size());
  const uint16_t check = crc32c_check16(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&check), sizeof check);
  const uint32_t crc = crc32c_mask(crc32c(body));
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  out += body;
  const auto chunk_bytes = static_cast<uint32_t>(out.size() + format::index_trailer_bytes);
  out.append(reinterpret_cast<const char*>(&chunk_bytes), sizeof chunk_bytes);
  out.append(format::index_trailer_magic, sizeof format::index_trailer_magic);
  return out;
}

/// The stored form of `digest`: its size, then a zstd frame that declares it.
std::string store_digest(std::string_view digest) {
  std::string out;
  put_varint(out, digest.size());
  if (digest.empty()) return out;
  std::string packed(ZSTD_compressBound(digest.size()), '\0');
  const std::size_t size =
      ZSTD_compress(packed.data(), packed.size(), digest.data(), digest.size(), 3);
  packed.resize(ZSTD_isError(size) != 0 ? 0 : size);
  put_varint(out, packed.size());
  return out + packed;
}

/// The digest of a stored form, expanded when it declares at most 1 MiB (else "").
std::string expand_digest(std::string_view stored) {
  std::size_t at = 0;
  uint64_t digest_bytes = 0;
  uint64_t packed_bytes = 0;
  if (get_varint(stored, at, digest_bytes) != VarintRead::Ok || digest_bytes == 0 ||
      digest_bytes > (1U << 20U) || get_varint(stored, at, packed_bytes) != VarintRead::Ok ||
      packed_bytes != stored.size() - at) {
    return "";
  }
  std::string digest(digest_bytes, '\0');
  const std::size_t size =
      ZSTD_decompress(digest.data(), digest.size(), stored.data() + at, packed_bytes);
  return ZSTD_isError(size) != 0 || size != digest_bytes ? std::string() : digest;
}

/// A packed chunk header for `stored` zstd bytes, with its check and CRC computed.
std::string encode_packed(bool key, uint32_t raw_bytes, uint32_t sample_count,
                          std::string_view stored) {
  std::string out(1, key ? format::packed_key_marker : format::packed_chunk_marker);
  put_varint(out, stored.size());
  put_varint(out, raw_bytes);
  put_varint(out, sample_count);
  const uint16_t check = crc32c_check16(out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&check), sizeof check);
  const uint32_t crc = crc32c_mask(crc32c(stored));
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  out += stored;
  return out;
}

std::optional<format::PackedChunkHeader> packed_header(std::string_view chunk) {
  format::PackedChunkHeader header;
  std::string why;
  if (format::parse_packed_header(chunk, header, why) != format::PackedHeaderStatus::Ok) {
    return std::nullopt;
  }
  return header;
}

/// The file header with its metadata replaced, header_bytes and CRC made to agree.
std::string encode_header(std::string_view old_header, std::string_view metadata) {
  std::string out(old_header.substr(0, format::file_header_fixed_bytes));
  const auto header_bytes = static_cast<uint32_t>(format::file_header_fixed_bytes +
                                                  metadata.size() + format::file_header_crc_bytes);
  std::memcpy(out.data() + offsetof(format::FileHeader, header_bytes), &header_bytes,
              sizeof header_bytes);
  out += metadata;
  const uint32_t crc = crc32c_mask(crc32c(out));
  out.append(reinterpret_cast<const char*>(&crc), sizeof crc);
  return out;
}

/// Values that sit on the edges readers must handle.
uint64_t interesting(std::mt19937_64& random, uint64_t near) {
  static constexpr std::array<uint64_t, 12> edges = {0,
                                                     1,
                                                     2,
                                                     0x7F,
                                                     0x80,
                                                     0xFFFF,
                                                     0xFFFFFFFFULL,
                                                     0x100000000ULL,
                                                     1ULL << 50U,
                                                     (1ULL << 50U) + 1,
                                                     0x7FFFFFFFFFFFFFFFULL,
                                                     0xFFFFFFFFFFFFFFFFULL};
  switch (random() % 3) {
    case 0:
      return edges[random() % edges.size()];
    case 1:
      return near + (random() % 17) - 8;
    default:
      return random();
  }
}

/// Runs libFuzzer's byte mutator over `bytes` (which may grow by up to `room` bytes).
void mutate_bytes_of(std::string& bytes, ByteMutator mutate_bytes, std::size_t room) {
  const std::size_t size = bytes.size();
  bytes.resize(size + room);
  const std::size_t used =
      mutate_bytes(reinterpret_cast<uint8_t*>(bytes.data()), size, bytes.size());
  bytes.resize(used);
}

/// CBOR that the digest parser must bound: nested arrays, or a length of 2^64-1.
std::string forged_cbor(std::mt19937_64& random) {
  switch (random() % 3) {
    case 0:  // arrays of one nested ~200,000 deep (issue 34: a stack overflow in 316 bytes)
      return std::string(1000 + random() % 250000, '\x81');
    case 1: {  // an array, map or string declaring 2^64-1 entries/bytes
      static constexpr std::array<char, 3> majors = {'\x9B', '\xBB', '\x7B'};
      return std::string(1, majors[random() % majors.size()]) + std::string(8, '\xFF');
    }
    default:  // maps nested in arrays
      std::string out;
      for (std::size_t i = 0, n = 1000 + random() % 50000; i < n; ++i) out += "\x81\xA1\x61k";
      return out;
  }
}

std::vector<std::size_t> indices_of(const std::vector<Piece>& pieces, Piece::Kind kind) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].kind == kind) out.push_back(i);
  }
  return out;
}

/// Changes one field of an index chunk (or its digest) and writes it back.
bool mutate_index(Piece& piece, std::mt19937_64& random, ByteMutator mutate_bytes) {
  std::optional<IndexFields> f = decode_index(piece.bytes);
  if (!f) return false;
  switch (random() % 8) {
    case 0:
      f->previous_offset = interesting(random, f->previous_offset);
      break;
    case 1:
      f->segment_offset = interesting(random, f->segment_offset);
      break;
    case 2:
      f->sample_count = interesting(random, f->sample_count);
      break;
    case 3:
      f->first_ns = static_cast<int64_t>(interesting(random, static_cast<uint64_t>(f->first_ns)));
      break;
    case 4:
      f->last_ns = static_cast<int64_t>(interesting(random, static_cast<uint64_t>(f->last_ns)));
      break;
    case 5:
      f->stored_digest = store_digest(forged_cbor(random));
      break;
    case 6:  // the stored sizes and frame themselves (a frame that declares another size)
      mutate_bytes_of(f->stored_digest, mutate_bytes, 16);
      break;
    default: {  // the digest's CBOR, byte by byte (behind the zstd frame and the CRC)
      std::string digest = expand_digest(f->stored_digest);
      mutate_bytes_of(digest, mutate_bytes, 64);
      f->stored_digest = store_digest(digest);
      break;
    }
  }
  piece.bytes = encode_index(*f);
  return true;
}

/// Changes the fields of a packed chunk header (the zstd data stays) and recomputes its checks.
bool mutate_packed_header(Piece& piece, std::mt19937_64& random) {
  const std::optional<format::PackedChunkHeader> h = packed_header(piece.bytes);
  if (!h) return false;
  bool key = h->key;
  uint32_t raw = h->raw_bytes;
  uint32_t count = h->sample_count;
  switch (random() % 3) {
    case 0:
      key = !key;
      break;
    case 1:
      raw = static_cast<uint32_t>(interesting(random, raw));
      break;
    default:
      count = static_cast<uint32_t>(interesting(random, count));
      break;
  }
  piece.bytes =
      encode_packed(key, raw, count, std::string_view(piece.bytes).substr(h->header_bytes));
  return true;
}

/// One segment's packed chunks, decompressed: where each lies in the pieces, its encoded samples
/// and how many they are.
struct Segment {
  std::vector<std::size_t> chunks;
  std::vector<std::string> raws;
  std::vector<uint32_t> counts;
};

/// Decompresses one segment chosen at random (a key chunk and the continuations after it);
/// nullopt when the file has none.
std::optional<Segment> decompress_segment(const std::vector<Piece>& pieces,
                                          std::mt19937_64& random) {
  std::vector<std::size_t> keys;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].kind == Piece::Kind::Packed && pieces[i].bytes[0] == format::packed_key_marker) {
      keys.push_back(i);
    }
  }
  if (keys.empty()) return std::nullopt;
  const std::size_t first = keys[random() % keys.size()];
  Segment segment;
  format::PackedChunkDecompressor decompressor;
  for (std::size_t i = first; i < pieces.size() && pieces[i].kind == Piece::Kind::Packed; ++i) {
    const std::optional<format::PackedChunkHeader> h = packed_header(pieces[i].bytes);
    if (!h || (i != first && h->key)) break;
    std::string raw;
    std::string why;
    if (!decompressor.decompress(*h, std::string_view(pieces[i].bytes).substr(h->header_bytes), raw,
                                 why)) {
      break;
    }
    segment.chunks.push_back(i);
    segment.raws.push_back(std::move(raw));
    segment.counts.push_back(h->sample_count);
  }
  if (segment.chunks.empty()) return std::nullopt;
  return segment;
}

/// Compresses the segment's chunks again in place of the old ones (a fresh zstd stream from its
/// key chunk, as the writer makes it).
void compress_segment(std::vector<Piece>& pieces, const Segment& segment) {
  format::PackedChunkCompressor compressor;
  for (std::size_t k = 0; k < segment.chunks.size(); ++k) {
    std::string chunk;
    compressor.compress(segment.raws[k], segment.counts[k], k == 0, chunk);
    pieces[segment.chunks[k]].bytes = std::move(chunk);
  }
}

/// Mutates the encoded samples of one chunk and compresses the segment again: the sample decoder
/// and the string table see forged content behind valid zstd frames and CRCs.
bool mutate_samples(std::vector<Piece>& pieces, std::mt19937_64& random, ByteMutator mutate_bytes) {
  std::optional<Segment> segment = decompress_segment(pieces, random);
  if (!segment) return false;
  std::string& target = segment->raws[random() % segment->raws.size()];
  if (random() % 4 == 0 && !target.empty()) {
    // A varint of 2^32-1 or 2^64-1 at a random place: a count, a length or a string-table
    // reference that points far outside anything the chunk holds.
    std::string big;
    put_varint(big, random() % 2 == 0 ? 0xFFFFFFFFULL : interesting(random, 0));
    target.replace(random() % target.size(), std::min<std::size_t>(big.size(), 1), big);
  } else {
    mutate_bytes_of(target, mutate_bytes, 256);
  }
  compress_segment(pieces, *segment);
  return true;
}

/// A value for one part of `b`, a byte field of breakdown_fields, chosen where the readers' checks
/// of a breakdown as a whole turn (core/plausible.hpp): the value that makes the non-PyTorch
/// parts fill the driver's reading exactly, or reserved and them fill it with the excess, or the
/// device's total, each and one past it; or the bound of any part, or far beyond.
uint64_t part_near_a_bound(std::mt19937_64& random, const DriverBreakdown& b,
                           const BreakdownField& field, std::optional<uint64_t> total_bytes) {
  const uint64_t value = breakdown_bytes(b, field).value_or(0);
  const uint64_t non_pytorch = b.non_pytorch_bytes();
  // The others' sums without this part (wrapping is a value to try as well).
  const uint64_t others = field.non_pytorch ? non_pytorch - value : non_pytorch;
  const std::array<uint64_t, 8> candidates = {
      b.driver_bytes - others,                                      // non-PyTorch == driver
      b.driver_bytes + b.excess_bytes - b.reserved_bytes - others,  // ... + reserved == + excess
      total_bytes.value_or(b.driver_bytes),
      max_plausible_bytes,
      b.driver_bytes,
      value,
      0,
      interesting(random, value),
  };
  const uint64_t chosen = candidates[random() % candidates.size()];
  return random() % 2 == 0 ? chosen : chosen + 1;
}

/// Decodes the samples of one segment, gives an agent's driver breakdown a part at or just past
/// a sum the readers check (adding an agent or a breakdown where the sample has none), and
/// encodes the segment again with the real encoder: the readers then meet breakdowns that are
/// plausible part by part but maybe not as a whole, behind valid checksums.
bool mutate_breakdowns(std::vector<Piece>& pieces, std::mt19937_64& random) {
  std::optional<Segment> segment = decompress_segment(pieces, random);
  if (!segment) return false;
  std::vector<SystemSample> samples;
  try {
    format::SampleDecoder decoder;
    format::TimestampPredictor timestamps;
    for (std::size_t k = 0; k < segment->raws.size(); ++k) {
      std::string_view cursor = segment->raws[k];
      for (uint32_t i = 0; i < segment->counts[k]; ++i) {
        decoder.decode(cursor, timestamps.base_ns(), samples.emplace_back());
        timestamps.observe(samples.back().timestamp_ns);
      }
      if (!cursor.empty()) return false;
    }
  } catch (const format::FormatError&) {
    return false;  // damaged already: the byte mutations cover it
  }
  if (samples.empty()) return false;
  SystemSample& sample = samples[random() % samples.size()];
  if (sample.allocators.empty() || random() % 8 == 0) {
    AllocatorSample agent;
    agent.pid = 4242;
    if (!sample.devices.empty()) agent.device_uuid = sample.devices[0].uuid;
    sample.allocators.push_back(agent);
  }
  AllocatorSample& agent = sample.allocators[random() % sample.allocators.size()];
  if (!agent.breakdown) {
    // An honest one to start from: 3 GiB = 2 GiB reserved + 512 MiB other + 512 MiB context.
    DriverBreakdown b;
    b.driver_bytes = 3ULL << 30U;
    b.reserved_bytes = 2ULL << 30U;
    b.other_bytes = 512ULL << 20U;
    b.context_bytes = 512ULL << 20U;
    agent.breakdown = b;
  }
  std::optional<uint64_t> total_bytes;
  for (const DeviceSample& d : sample.devices) {
    if (d.uuid == agent.device_uuid) total_bytes = d.total_bytes;
  }
  std::vector<const BreakdownField*> parts;
  for (const BreakdownField& field : breakdown_fields) {
    if (is_breakdown_bytes(field)) parts.push_back(&field);
  }
  DriverBreakdown& b = *agent.breakdown;
  for (uint64_t changes = 1 + random() % 2; changes > 0; --changes) {
    const BreakdownField& field = *parts[random() % parts.size()];
    const uint64_t value = part_near_a_bound(random, b, field, total_bytes);
    std::visit(
        [&](auto member) {
          if constexpr (!std::is_same_v<decltype(member), int64_t DriverBreakdown::*> &&
                        !std::is_same_v<decltype(member), uint32_t DriverBreakdown::*>) {
            b.*member = value;
          }
        },
        field.member);
  }
  format::SampleEncoder encoder;
  format::TimestampPredictor timestamps;
  std::size_t at = 0;
  for (std::size_t k = 0; k < segment->raws.size(); ++k) {
    segment->raws[k].clear();
    for (uint32_t i = 0; i < segment->counts[k]; ++i, ++at) {
      if (!encoder.encode(samples[at], timestamps.base_ns(), segment->raws[k])) return false;
      timestamps.observe(samples[at].timestamp_ns);
    }
  }
  compress_segment(pieces, *segment);
  return true;
}

/// Copies, drops, swaps or cuts whole chunks; sometimes appends the file to itself (`cat a b`).
bool mutate_order(std::vector<Piece>& pieces, std::mt19937_64& random) {
  if (pieces.size() < 2) return false;
  const std::size_t n = pieces.size();
  const std::size_t a = 1 + random() % (n - 1);  // never the file header
  const std::size_t b = 1 + random() % (n - 1);
  switch (random() % 6) {
    case 0:
      pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(b), pieces[a]);
      break;
    case 1:
      pieces.erase(pieces.begin() + static_cast<std::ptrdiff_t>(a));
      break;
    case 2:
      std::swap(pieces[a], pieces[b]);
      break;
    case 3:
      pieces.resize(a);
      break;
    case 4: {  // concatenated recordings: a second header in the middle of the data
      const std::vector<Piece> copy = pieces;
      pieces.insert(pieces.end(), copy.begin(), copy.end());
      break;
    }
    default:  // a stray index trailer ("VSIX") where a chunk should start
      pieces.insert(pieces.begin() + static_cast<std::ptrdiff_t>(a),
                    Piece{Piece::Kind::Raw, std::string("\x10\0\0\0VSIX", 8)});
      break;
  }
  if (random() % 2 == 0) reindex(pieces);
  return true;
}

}  // namespace

std::vector<Piece> split_recording(std::string_view file) {
  std::vector<Piece> pieces;
  format::FileHeader header{};
  if (file.size() < sizeof header) return {Piece{Piece::Kind::Raw, std::string(file)}};
  std::memcpy(&header, file.data(), sizeof header);
  if (std::memcmp(header.magic, format::file_magic, sizeof header.magic) != 0 ||
      header.version != format::recording_version || header.header_bytes > file.size() ||
      header.header_bytes < format::file_header_fixed_bytes + format::file_header_crc_bytes) {
    return {Piece{Piece::Kind::Raw, std::string(file)}};
  }
  pieces.push_back(Piece{Piece::Kind::Header, std::string(file.substr(0, header.header_bytes))});
  std::size_t at = header.header_bytes;
  while (at < file.size()) {
    const std::string_view rest = file.substr(at);
    std::size_t bytes = 0;
    Piece::Kind kind = Piece::Kind::Raw;
    if (rest[0] == format::index_marker) {
      std::size_t v = 1;
      uint64_t body_bytes = 0;
      if (get_varint(rest, v, body_bytes) == VarintRead::Ok &&
          rest.size() >= v + 6 + format::index_trailer_bytes &&
          body_bytes <= rest.size() - (v + 6 + format::index_trailer_bytes)) {
        bytes = v + 6 + body_bytes + format::index_trailer_bytes;
        kind = Piece::Kind::Index;
      }
    } else if (const std::optional<format::PackedChunkHeader> h = packed_header(rest)) {
      if (h->stored_bytes <= rest.size() - h->header_bytes) {
        bytes = h->header_bytes + h->stored_bytes;
        kind = Piece::Kind::Packed;
      }
    }
    if (kind == Piece::Kind::Raw) bytes = rest.size();
    pieces.push_back(Piece{kind, std::string(rest.substr(0, bytes))});
    at += bytes;
  }
  return pieces;
}

std::string join(const std::vector<Piece>& pieces) {
  std::string out;
  for (const Piece& piece : pieces) out += piece.bytes;
  return out;
}

bool set_index_digest(Piece& piece, std::string_view digest) {
  std::optional<IndexFields> f = decode_index(piece.bytes);
  if (!f) return false;
  f->stored_digest = store_digest(digest);
  piece.bytes = encode_index(*f);
  return true;
}

void reindex(std::vector<Piece>& pieces) {
  uint64_t offset = 0;
  uint64_t segment_offset = 0;
  uint64_t samples = 0;
  uint64_t previous_index = 0;
  for (Piece& piece : pieces) {
    if (piece.kind == Piece::Kind::Packed) {
      if (const std::optional<format::PackedChunkHeader> h = packed_header(piece.bytes)) {
        if (h->key) {
          segment_offset = offset;
          samples = 0;
        }
        samples += h->sample_count;
      }
    } else if (piece.kind == Piece::Kind::Index) {
      if (std::optional<IndexFields> f = decode_index(piece.bytes)) {
        f->previous_offset = previous_index;
        f->segment_offset = segment_offset;
        f->sample_count = samples;
        piece.bytes = encode_index(*f);
      }
      previous_index = offset;
    }
    offset += piece.bytes.size();
  }
}

bool mutate_structure(std::vector<Piece>& pieces, std::mt19937_64& random,
                      ByteMutator mutate_bytes) {
  switch (random() % 7) {
    case 6:
      return mutate_breakdowns(pieces, random);
    case 0:
    case 1: {
      const std::vector<std::size_t> found = indices_of(pieces, Piece::Kind::Index);
      return !found.empty() &&
             mutate_index(pieces[found[random() % found.size()]], random, mutate_bytes);
    }
    case 2: {
      const std::vector<std::size_t> found = indices_of(pieces, Piece::Kind::Packed);
      return !found.empty() && mutate_packed_header(pieces[found[random() % found.size()]], random);
    }
    case 3:
      return mutate_samples(pieces, random, mutate_bytes);
    case 4: {
      if (pieces.empty() || pieces[0].kind != Piece::Kind::Header) return false;
      const std::string_view header = pieces[0].bytes;
      std::string metadata(header.substr(
          format::file_header_fixed_bytes,
          header.size() - format::file_header_fixed_bytes - format::file_header_crc_bytes));
      mutate_bytes_of(metadata, mutate_bytes, 64);
      pieces[0].bytes = encode_header(header, metadata);
      return true;
    }
    default:
      return mutate_order(pieces, random);
  }
}

}  // namespace vramscope::fuzz
