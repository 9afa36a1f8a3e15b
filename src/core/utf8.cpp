// src/core/utf8.cpp -- UTF-8 validation and replacement of ill-formed sequences
#include "vramscope/core/utf8.hpp"

#include <cstddef>
#include <cstdint>

namespace vramscope {
namespace {

/// Length of the well-formed sequence at `at`, or 0 with `bad` set to the bytes of its maximal
/// ill-formed subpart (at least 1). Ranges are those of Unicode table 3-7.
std::size_t sequence_length(std::string_view text, std::size_t at, std::size_t& bad) {
  const auto byte = [&](std::size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(at);
  bad = 1;
  if (lead < 0x80U) return 1;
  std::size_t length = 0;
  uint8_t low = 0x80U;
  uint8_t high = 0xBFU;
  if (lead >= 0xC2U && lead <= 0xDFU) {
    length = 2;
  } else if (lead >= 0xE0U && lead <= 0xEFU) {
    length = 3;
    if (lead == 0xE0U) low = 0xA0U;   // no overlong forms
    if (lead == 0xEDU) high = 0x9FU;  // no surrogates
  } else if (lead >= 0xF0U && lead <= 0xF4U) {
    length = 4;
    if (lead == 0xF0U) low = 0x90U;   // no overlong forms
    if (lead == 0xF4U) high = 0x8FU;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    if (at + i >= text.size()) {
      bad = i;
      return 0;
    }
    const uint8_t next = byte(at + i);
    const uint8_t min = i == 1 ? low : 0x80U;
    const uint8_t max = i == 1 ? high : 0xBFU;
    if (next < min || next > max) {
      bad = i;
      return 0;
    }
  }
  return length;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  std::size_t bad = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = sequence_length(text, at, bad);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

std::string to_valid_utf8(std::string_view text) {
  if (is_valid_utf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  std::size_t bad = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = sequence_length(text, at, bad);
    if (length == 0) {
      out += utf8_replacement;
      at += bad;
    } else {
      out.append(text.substr(at, length));
      at += length;
    }
  }
  return out;
}

}  // namespace vramscope
