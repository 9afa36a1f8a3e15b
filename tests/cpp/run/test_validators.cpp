// tests/cpp/run/test_validators.cpp -- strict decimal parsing behind --listen and count options
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "validators.hpp"

namespace vramscope::cli {
namespace {

TEST(ParseStrictDecimal, DigitsOnlyWithinTheMaximum) {
  EXPECT_EQ(parse_strict_decimal("0", 65535), 0U);
  EXPECT_EQ(parse_strict_decimal("8726", 65535), 8726U);
  EXPECT_EQ(parse_strict_decimal("65535", 65535), 65535U);
  EXPECT_EQ(parse_strict_decimal("18446744073709551615", UINT64_MAX), UINT64_MAX);
}

// std::stoi read " 80" as 80 and "+0" as 0: a port we report must be the text we were given.
TEST(ParseStrictDecimal, RefusesWhatStoiForgives) {
  for (const char* text : {"", " 80", "80 ", "+0", "-0", "0x50", "8e1", "65536", "1.0", "٨٠",
                           "18446744073709551616"}) {
    EXPECT_EQ(parse_strict_decimal(text, 65535), std::nullopt) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace vramscope::cli
