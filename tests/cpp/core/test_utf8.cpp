// tests/cpp/core/test_utf8.cpp -- validation and replacement of ill-formed UTF-8
#include <gtest/gtest.h>

#include <string>

#include "vramscope/core/utf8.hpp"

namespace vramscope {
namespace {

const std::string fffd(utf8_replacement);

TEST(Utf8, WellFormedTextIsUnchanged) {
  for (const std::string text : {"", "plain ascii", "caf\xC3\xA9", "\xE2\x82\xAC 5",
                                 "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(is_valid_utf8(text)) << text;
    EXPECT_EQ(to_valid_utf8(text), text);
  }
}

TEST(Utf8, EachMaximalIllFormedSubpartBecomesOneReplacement) {
  EXPECT_EQ(to_valid_utf8("a\xFFz"), "a" + fffd + "z");
  EXPECT_EQ(to_valid_utf8("\x80\x80"), fffd + fffd) << "stray continuation bytes";
  EXPECT_EQ(to_valid_utf8("\xC0\xAF"), fffd + fffd) << "overlong '/'";
  EXPECT_EQ(to_valid_utf8("\xE0\x80\xAF"), fffd + fffd + fffd) << "overlong 3-byte form";
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80"), fffd + fffd + fffd) << "a surrogate";
  EXPECT_EQ(to_valid_utf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd) << "above U+10FFFF";
  EXPECT_EQ(to_valid_utf8("\xE2\x82"), fffd) << "a truncated sequence is one subpart";
  EXPECT_EQ(to_valid_utf8("\xE2\x82x"), fffd + "x");
  EXPECT_EQ(to_valid_utf8("\xF0\x9F\x98"), fffd);
  for (const std::string bad : {"\xFF", "\xC3", "\xED\xBF\xBF", "x\xF5\x80"}) {
    EXPECT_FALSE(is_valid_utf8(bad));
    EXPECT_TRUE(is_valid_utf8(to_valid_utf8(bad)));
  }
}

}  // namespace
}  // namespace vramscope
