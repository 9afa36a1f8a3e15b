// src/format/include/vramscope/format/varint.hpp -- LEB128 varints and zigzag, for every part of the recording format
//
// One coding for the sample codec, the packed chunk headers and the index chunks, so the three
// cannot drift apart. Readers get a reason back rather than an exception: the chunk readers
// treat a cut varint as a torn chunk, the sample decoder as a format error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vramscope::format {

/// Appends `value` as a LEB128 varint (7 bits a byte, low bits first). Built on the stack and
/// appended once: a push_back per byte checked the string's room at every byte of every field.
inline void put_varint(std::string& out, uint64_t value) {
  if (value < 0x80U) {
    out.push_back(static_cast<char>(value));
    return;
  }
  char bytes[10];
  std::size_t used = 0;
  while (value >= 0x80U) {
    bytes[used++] = static_cast<char>((value & 0x7FU) | 0x80U);
    value >>= 7U;
  }
  bytes[used++] = static_cast<char>(value);
  out.append(bytes, used);
}

/// What get_varint() found.
enum class VarintRead : uint8_t {
  Ok,
  /// The bytes ended inside the varint.
  Cut,
  /// The value does not fit the bits asked for.
  Overflow,
  /// More bytes than a value of that many bits takes.
  TooLong,
};

/// Reads a varint of at most `max_bits` (32 or 64) from `bytes` at `at`, advancing `at`.
inline VarintRead get_varint(std::string_view bytes, std::size_t& at, uint64_t& out,
                             unsigned max_bits = 64) {
  uint64_t value = 0;
  for (unsigned shift = 0; shift < max_bits; shift += 7) {
    if (at >= bytes.size()) return VarintRead::Cut;
    const auto byte = static_cast<unsigned char>(bytes[at++]);
    // The 10th byte of a 64-bit value may only carry its top bit.
    if (shift == 63 && byte > 1) return VarintRead::Overflow;
    value |= static_cast<uint64_t>(byte & 0x7FU) << shift;
    if ((byte & 0x80U) == 0) {
      if (max_bits < 64 && value >> max_bits != 0) return VarintRead::Overflow;
      out = value;
      return VarintRead::Ok;
    }
  }
  return VarintRead::TooLong;
}

/// Signed to unsigned so that small magnitudes of either sign stay short.
inline uint64_t zigzag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1U) ^ static_cast<uint64_t>(value >> 63);
}

inline int64_t unzigzag(uint64_t value) {
  return static_cast<int64_t>((value >> 1U) ^ (0 - (value & 1U)));
}

}  // namespace vramscope::format
