// tests/cpp/core/test_crc32c.cpp -- CRC-32C check values, incremental use, TFRecord mask
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vramscope/core/crc32c.hpp"

namespace vramscope {
namespace {

/// Bit-at-a-time reference, independent of the sliced tables.
uint32_t reference_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFU;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1U) ^ ((crc & 1U) ? 0x82F63B78U : 0U);
  }
  return ~crc;
}

TEST(Crc32c, CheckValue) { EXPECT_EQ(crc32c("123456789"), 0xE3069283U); }

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(crc32c(""), 0U);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros and 32 bytes of 0xFF.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAU);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43U);
}

TEST(Crc32c, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t length = 0; offset + length <= data.size(); length += 13) {
      const std::string slice = data.substr(offset, length);
      ASSERT_EQ(crc32c(slice), reference_crc32c(slice)) << offset << "+" << length;
    }
  }
}

TEST(Crc32c, ExtendEqualsWhole) {
  const std::string all = "the quick brown fox jumps over the lazy dog";
  for (std::size_t split = 0; split <= all.size(); ++split) {
    const uint32_t first = crc32c(all.data(), split);
    EXPECT_EQ(crc32c_extend(first, all.data() + split, all.size() - split), crc32c(all));
  }
}

TEST(Crc32c, TfrecordMask) {
  EXPECT_EQ(crc32c_mask(0xE3069283U), 0xC78AB0E5U);
  for (uint32_t value : {0U, 1U, 0xFFFFFFFFU, 0xE3069283U, 0x12345678U}) {
    EXPECT_EQ(crc32c_unmask(crc32c_mask(value)), value);
  }
  // The 8-byte length 24 of the TFRecord test vector in the formats note.
  const std::vector<unsigned char> length{0x18, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(crc32c_mask(crc32c(length.data(), length.size())), 0x224B7FA3U);
}

}  // namespace
}  // namespace vramscope
