// src/format/packed_chunk.cpp -- packed (zstd) chunks: header coding, compressor, decompressor
//
// The stream is flushed (ZSTD_e_flush) at the end of every chunk, so every chunk decodes as soon
// as it has been read, with the chunks before it back to the last key chunk as its history. A
// chunk of a few samples that look like the previous ones costs a few bytes per sample; a
// reader that stops at a torn chunk has lost only that chunk.
#include "vramscope/format/packed_chunk.hpp"

#include <zstd.h>

#include <cstring>
#include <stdexcept>

#include "vramscope/core/crc32c.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/format/varint.hpp"

namespace vramscope::format {
namespace {

/// Writes `value` as a LEB128 varint (at most 5 bytes).
void put_varint32(std::string& out, uint32_t value) { put_varint(out, value); }

/// Reads a LEB128 varint of at most 5 bytes that fits 32 bits from `bytes` at `at`.
/// Returns false when the bytes end first (`*cut` set) or the varint is malformed.
bool get_varint32(std::string_view bytes, std::size_t& at, uint32_t& out, bool* cut) {
  uint64_t value = 0;
  const VarintRead read = get_varint(bytes, at, value, 32);
  if (read == VarintRead::Cut) *cut = true;
  if (read != VarintRead::Ok) return false;
  out = static_cast<uint32_t>(value);
  return true;
}

void put_u32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

uint32_t get_u32(std::string_view bytes, std::size_t at) {
  uint32_t value = 0;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  return value;
}

}  // namespace

PackedHeaderStatus parse_packed_header(std::string_view bytes, PackedChunkHeader& out,
                                       std::string& why) {
  if (bytes.empty()) return PackedHeaderStatus::Cut;
  PackedChunkHeader header;
  if (bytes[0] == packed_key_marker) {
    header.key = true;
  } else if (bytes[0] != packed_chunk_marker) {
    why = "no chunk marker";
    return PackedHeaderStatus::Bad;
  }
  bool cut = false;
  std::size_t at = 1;
  if (!get_varint32(bytes, at, header.stored_bytes, &cut) ||
      !get_varint32(bytes, at, header.raw_bytes, &cut) ||
      !get_varint32(bytes, at, header.sample_count, &cut)) {
    if (cut) return PackedHeaderStatus::Cut;
    why = "malformed chunk header";
    return PackedHeaderStatus::Bad;
  }
  if (bytes.size() < at + 6) return PackedHeaderStatus::Cut;
  uint16_t check = 0;
  std::memcpy(&check, bytes.data() + at, sizeof check);
  if (check != crc32c_check16(bytes.data(), at)) {
    why = "chunk header checksum mismatch";
    return PackedHeaderStatus::Bad;
  }
  header.payload_crc = get_u32(bytes, at + 2);
  header.header_bytes = static_cast<uint32_t>(at + 6);
  if (header.raw_bytes == 0 || header.raw_bytes > max_chunk_payload_bytes ||
      header.stored_bytes == 0 || header.stored_bytes > max_chunk_payload_bytes) {
    why = "implausible chunk size " + std::to_string(header.stored_bytes) + " -> " +
          std::to_string(header.raw_bytes);
    return PackedHeaderStatus::Bad;
  }
  // Every encoded sample takes at least two bytes (its length and its timestamp).
  if (header.sample_count == 0 || header.sample_count > header.raw_bytes / 2) {
    why = "implausible sample count " + std::to_string(header.sample_count);
    return PackedHeaderStatus::Bad;
  }
  out = header;
  return PackedHeaderStatus::Ok;
}

// ---------------------------------------------------------------------------------------------
// Compressor

struct PackedChunkCompressor::State {
  ZSTD_CCtx* context = nullptr;
  /// Scratch for the compressed bytes of one chunk, reused.
  std::string stored;
};

PackedChunkCompressor::PackedChunkCompressor() : m_state(std::make_unique<State>()) {
  m_state->context = ZSTD_createCCtx();
  if (m_state->context == nullptr) throw std::bad_alloc();
  // Level 3 (zstd's default) costs microseconds per sample; the window matches what the reader
  // accepts; no frame checksum or content size: the chunk has its own CRC and size.
  ZSTD_CCtx_setParameter(m_state->context, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(m_state->context, ZSTD_c_windowLog, packed_window_log);
  ZSTD_CCtx_setParameter(m_state->context, ZSTD_c_checksumFlag, 0);
  ZSTD_CCtx_setParameter(m_state->context, ZSTD_c_contentSizeFlag, 0);
}

PackedChunkCompressor::~PackedChunkCompressor() { ZSTD_freeCCtx(m_state->context); }

void PackedChunkCompressor::compress(std::string_view raw, uint32_t sample_count, bool key,
                                     std::string& out) {
  ZSTD_CCtx* context = m_state->context;
  if (key) ZSTD_CCtx_reset(context, ZSTD_reset_session_only);
  std::string& stored = m_state->stored;
  stored.resize(ZSTD_compressBound(raw.size()) + 64);
  ZSTD_inBuffer in{raw.data(), raw.size(), 0};
  ZSTD_outBuffer sink{stored.data(), stored.size(), 0};
  for (;;) {
    const std::size_t left = ZSTD_compressStream2(context, &sink, &in, ZSTD_e_flush);
    if (ZSTD_isError(left) != 0) {
      throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(left));
    }
    if (left == 0) break;
    // Not expected with a compressBound-sized buffer, but never loop without room.
    stored.resize(stored.size() * 2);
    sink.dst = stored.data();
    sink.size = stored.size();
  }
  stored.resize(sink.pos);

  const std::size_t header_at = out.size();
  out.push_back(key ? packed_key_marker : packed_chunk_marker);
  put_varint32(out, static_cast<uint32_t>(stored.size()));
  put_varint32(out, static_cast<uint32_t>(raw.size()));
  put_varint32(out, sample_count);
  const uint16_t check = crc32c_check16(out.data() + header_at, out.size() - header_at);
  out.append(reinterpret_cast<const char*>(&check), sizeof check);
  put_u32(out, crc32c_mask(crc32c(stored)));
  out += stored;
}

// ---------------------------------------------------------------------------------------------
// Decompressor

struct PackedChunkDecompressor::State {
  ZSTD_DCtx* context = nullptr;
  /// Has a key chunk started the stream (and nothing broken it since)?
  bool in_stream = false;
};

PackedChunkDecompressor::PackedChunkDecompressor() : m_state(std::make_unique<State>()) {
  m_state->context = ZSTD_createDCtx();
  if (m_state->context == nullptr) throw std::bad_alloc();
  // A frame that asks for a larger window is refused (frameParameter_windowTooLarge) instead of
  // making the reader allocate what a crafted file asks for.
  ZSTD_DCtx_setParameter(m_state->context, ZSTD_d_windowLogMax, packed_window_log);
}

PackedChunkDecompressor::~PackedChunkDecompressor() { ZSTD_freeDCtx(m_state->context); }

bool PackedChunkDecompressor::decompress(const PackedChunkHeader& header, std::string_view stored,
                                         std::string& raw, std::string& why) {
  ZSTD_DCtx* context = m_state->context;
  if (header.key) {
    ZSTD_DCtx_reset(context, ZSTD_reset_session_only);
    m_state->in_stream = true;
  }
  if (!m_state->in_stream) {
    why = "chunk continues a compressed stream that no key chunk started";
    return false;
  }
  if (stored.size() != header.stored_bytes || header.raw_bytes > max_chunk_payload_bytes) {
    m_state->in_stream = false;
    why = "chunk sizes disagree with its header";
    return false;
  }
  // One byte of room past raw_bytes, so that data expanding to more than the header says is
  // seen (and refused) rather than left inside zstd for the next chunk.
  raw.resize(static_cast<std::size_t>(header.raw_bytes) + 1);
  // A zstd error ends the stream: the chunks after this one have lost their history.
  const auto damaged = [&](std::size_t hint) {
    if (ZSTD_isError(hint) == 0) return false;
    m_state->in_stream = false;
    why = std::string("compressed data is damaged (") + ZSTD_getErrorName(hint) + ")";
    return true;
  };
  ZSTD_inBuffer in{stored.data(), stored.size(), 0};
  ZSTD_outBuffer sink{raw.data(), raw.size(), 0};
  while (in.pos < in.size && sink.pos < sink.size) {
    const std::size_t before_in = in.pos;
    const std::size_t before_out = sink.pos;
    if (damaged(ZSTD_decompressStream(context, &sink, &in))) return false;
    if (in.pos == before_in && sink.pos == before_out) break;  // no progress: checked below
  }
  // zstd may still hold decoded bytes of this chunk's last block; draining them with no new
  // input is bounded by the one spare byte of room.
  if (sink.pos < sink.size) {
    ZSTD_inBuffer none{nullptr, 0, 0};
    if (damaged(ZSTD_decompressStream(context, &sink, &none))) return false;
  }
  if (in.pos != in.size || sink.pos != header.raw_bytes) {
    m_state->in_stream = false;
    why = "compressed data does not expand to the " + std::to_string(header.raw_bytes) +
          " bytes its header says";
    return false;
  }
  raw.resize(header.raw_bytes);
  return true;
}

}  // namespace vramscope::format
