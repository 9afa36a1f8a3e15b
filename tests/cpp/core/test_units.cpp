// tests/cpp/core/test_units.cpp -- interval and size parsing, byte and duration printing
#include <gtest/gtest.h>

#include <limits>

#include "vramscope/units.hpp"

namespace vramscope {
namespace {

constexpr int64_t ms = 1'000'000;
constexpr int64_t sec = 1'000'000'000;

TEST(ParseDuration, AcceptsEveryUnit) {
  EXPECT_EQ(parse_duration_ns("10ms"), 10 * ms);
  EXPECT_EQ(parse_duration_ns("0.5s"), sec / 2);
  EXPECT_EQ(parse_duration_ns("2"), 2 * sec);
  EXPECT_EQ(parse_duration_ns("250us"), 250'000);
  EXPECT_EQ(parse_duration_ns("1m"), 60 * sec);
  EXPECT_EQ(parse_duration_ns("1h"), 3600 * sec);
  EXPECT_EQ(parse_duration_ns("7ns"), 7);
  EXPECT_EQ(parse_duration_ns("1min"), 60 * sec);
}

TEST(ParseDuration, IsExactForDecimalFractions) {
  // strtod would give 0.1 * 1e9 = 99999999.99...; the parser must not lose the last ns.
  EXPECT_EQ(parse_duration_ns("0.1s"), 100'000'000);
  EXPECT_EQ(parse_duration_ns("1.001ms"), 1'001'000);
  EXPECT_EQ(parse_duration_ns(".25s"), sec / 4);
  EXPECT_EQ(parse_duration_ns("1.5h"), 5400 * sec);
  EXPECT_EQ(parse_duration_ns("0.0000000015s"), 1);  // below 1 ns rounds down
}

TEST(ParseDuration, ToleratesCaseAndSurroundingSpace) {
  EXPECT_EQ(parse_duration_ns(" 10 ms "), 10 * ms);
  EXPECT_EQ(parse_duration_ns("10MS"), 10 * ms);
  EXPECT_EQ(parse_duration_ns("0"), 0);
}

TEST(ParseDuration, RejectsMalformedInput) {
  for (const char* bad : {"", " ", "abc", "-1s", "+1s", "10xs", "1e400", "1e3", ".", "s", "1..2s",
                          "1.2.3s", "10 m s", "0x10", "1,5s", "inf", "nan"}) {
    EXPECT_FALSE(parse_duration_ns(bad).has_value()) << bad;
  }
}

TEST(ParseDuration, RejectsOverflow) {
  // int64 holds about 292 years of nanoseconds.
  EXPECT_EQ(parse_duration_ns("9223372036854775807ns"), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(parse_duration_ns("9223372036854775808ns").has_value());
  EXPECT_FALSE(parse_duration_ns("2562048h").has_value());
  EXPECT_TRUE(parse_duration_ns("2562047h").has_value());
  EXPECT_FALSE(parse_duration_ns("99999999999999999999999s").has_value());
  EXPECT_FALSE(parse_duration_ns("18446744073709551616").has_value());
}

TEST(ParseSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size_bytes("512"), 512U);
  EXPECT_EQ(parse_size_bytes("512B"), 512U);
  EXPECT_EQ(parse_size_bytes("4KiB"), 4096U);
  EXPECT_EQ(parse_size_bytes("4K"), 4096U);
  EXPECT_EQ(parse_size_bytes("4KB"), 4000U);
  EXPECT_EQ(parse_size_bytes("10MiB"), 10U << 20U);
  EXPECT_EQ(parse_size_bytes("10M"), 10U << 20U);
  EXPECT_EQ(parse_size_bytes("10MB"), 10'000'000U);
  EXPECT_EQ(parse_size_bytes("1.5GiB"), 3ULL << 29U);
  EXPECT_EQ(parse_size_bytes("2G"), 2ULL << 30U);
  EXPECT_EQ(parse_size_bytes("2GB"), 2'000'000'000U);
  EXPECT_EQ(parse_size_bytes("1TiB"), 1ULL << 40U);
  EXPECT_EQ(parse_size_bytes("2 gib"), 2ULL << 30U);
}

TEST(ParseSize, FractionsRoundDown) {
  EXPECT_EQ(parse_size_bytes("1.5"), 1U);
  EXPECT_EQ(parse_size_bytes("0.1KiB"), 102U);
}

TEST(ParseSize, RejectsMalformedAndOverflowingInput) {
  for (const char* bad : {"", "abc", "-1", "1XB", "1 KiBs", "1e9", "KiB", "1.5.1G"}) {
    EXPECT_FALSE(parse_size_bytes(bad).has_value()) << bad;
  }
  EXPECT_EQ(parse_size_bytes("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(parse_size_bytes("18446744073709551616").has_value());
  EXPECT_FALSE(parse_size_bytes("16384PiB").has_value());
}

TEST(ToMib, RoundsUpLikeNvidiaSmi) {
  EXPECT_EQ(to_mib(0), 0U);
  EXPECT_EQ(to_mib(1), 1U);
  EXPECT_EQ(to_mib((1U << 20U) - 1), 1U);
  EXPECT_EQ(to_mib(1U << 20U), 1U);
  EXPECT_EQ(to_mib((1U << 20U) + 1), 2U);
  EXPECT_EQ(to_mib(644'939'776ULL), 616U);  // H200 reserved 615.06 MiB: nvidia-smi prints 616
  EXPECT_EQ(to_mib(~0ULL), 1ULL << 44U);
  EXPECT_EQ(to_mib(85'520'809'984ULL), 81'559U);  // an 80 GB H100 ("81559MiB")
}

TEST(FormatBytes, Boundaries) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(3072), "3.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(99 * 1024 + 972), "99.9 KiB");
  EXPECT_EQ(format_bytes(100 * 1024), "100 KiB");
  EXPECT_EQ(format_bytes(300ULL << 20U), "300 MiB");
  EXPECT_EQ(format_bytes((1ULL << 20U) - 1), "1.0 MiB");  // 1023.999 KiB must not print "1024 KiB"
  EXPECT_EQ(format_bytes(3ULL << 29U), "1.5 GiB");
  EXPECT_EQ(format_bytes(87'617'339'392ULL), "81.6 GiB");
  EXPECT_EQ(format_bytes(std::numeric_limits<uint64_t>::max()), "16.0 EiB");
}

TEST(FormatBytesDelta, Signs) {
  EXPECT_EQ(format_bytes_delta(0), "0 B");
  EXPECT_EQ(format_bytes_delta(1288490189), "+1.2 GiB");
  EXPECT_EQ(format_bytes_delta(-(300LL << 20U)), "-300 MiB");
  EXPECT_EQ(format_bytes_delta(-1), "-1 B");
  EXPECT_EQ(format_bytes_delta(std::numeric_limits<int64_t>::min()), "-8.0 EiB");
}

TEST(FormatDuration, EachRange) {
  EXPECT_EQ(format_duration_ns(0), "0 ns");
  EXPECT_EQ(format_duration_ns(999), "999 ns");
  EXPECT_EQ(format_duration_ns(250'000), "250 us");
  EXPECT_EQ(format_duration_ns(850 * ms), "850 ms");
  EXPECT_EQ(format_duration_ns(999 * ms), "999 ms");
  EXPECT_EQ(format_duration_ns(sec), "1.0 s");
  EXPECT_EQ(format_duration_ns(12 * sec + 500 * ms), "12.5 s");
  EXPECT_EQ(format_duration_ns(59 * sec + 960 * ms), "1m00s");
  EXPECT_EQ(format_duration_ns(185 * sec), "3m05s");
  EXPECT_EQ(format_duration_ns(3599 * sec), "59m59s");
  EXPECT_EQ(format_duration_ns(3600 * sec), "1h00m");
  EXPECT_EQ(format_duration_ns(7260 * sec + 59 * sec), "2h01m");
  EXPECT_EQ(format_duration_ns(-1500 * ms), "-1.5 s");
  EXPECT_FALSE(format_duration_ns(std::numeric_limits<int64_t>::min()).empty());
}

}  // namespace
}  // namespace vramscope
