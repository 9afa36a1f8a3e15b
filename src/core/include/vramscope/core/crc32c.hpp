// src/core/include/vramscope/core/crc32c.hpp -- CRC-32C (Castagnoli) and the TFRecord/LevelDB checksum mask
//
// Used by the recording format (chunk and header checksums) and by the TensorBoard writer
// (TFRecord framing). Reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vramscope {

/// CRC-32C of `size` bytes; crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, std::size_t size);

/// CRC-32C of a string's bytes.
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

/// Continues a CRC over more bytes: crc32c_extend(crc32c(a), b) == crc32c(a + b).
uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t size);

/// TFRecord/LevelDB mask: rotate right by 15, add 0xA282EAD8. Stored CRCs are masked because
/// the CRC of data that itself embeds CRCs is weak.
constexpr uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15U) | (crc << 17U)) + 0xA282EAD8U; }

/// Inverse of crc32c_mask().
constexpr uint32_t crc32c_unmask(uint32_t masked) {
  const uint32_t rotated = masked - 0xA282EAD8U;
  return (rotated >> 17U) | (rotated << 15U);
}

/// The recording's chunk header check: the low 16 bits of the masked CRC-32C of the header bytes
/// before it. Short, because a chunk may hold a single sample of a dozen bytes; it only has to
/// tell a damaged length from a torn chunk, and the payload CRC still covers every byte.
inline uint16_t crc32c_check16(const char* header, std::size_t size) {
  return static_cast<uint16_t>(crc32c_mask(crc32c(header, size)) & 0xFFFFU);
}

}  // namespace vramscope
