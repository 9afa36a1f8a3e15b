// tests/cpp/report/test_text_cells.cpp -- fixed-width cells: UTF-8 widths, cuts, escapes
#include <gtest/gtest.h>

#include "vramscope/report/text_cells.hpp"

namespace vramscope::report {
namespace {

TEST(TextCells, WidthCountsCodePointsNotBytes) {
  EXPECT_EQ(display_width("abc"), 3U);
  EXPECT_EQ(display_width("h\xC3\xA9llo"), 5U);  // "héllo"
  EXPECT_EQ(display_width(""), 0U);
}

TEST(TextCells, CutTextEndsWithDotsAndNeverSplitsACodePoint) {
  EXPECT_EQ(fit_text("abcdefgh", 8), "abcdefgh");
  EXPECT_EQ(fit_text("abcdefghi", 8), "abcde...");
  EXPECT_EQ(fit_text("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 4), "\xC3\xA9...");
  EXPECT_EQ(fit_text("abcdef", 2), "ab");
}

// show printed a 2^50-byte GPU as "107374..." and diff ran two such columns together:
// docs/security.md promises a leading "…" that keeps the last digits.
TEST(TextCells, ARightAlignedCellTooWideKeepsItsLastDigits) {
  EXPECT_EQ(fit_text_end("1073741824MiB", 13), "1073741824MiB");
  EXPECT_EQ(fit_text_end("1073741824MiB", 9), "\u202641824MiB");
  EXPECT_EQ(pad_left("1073741824MiB", 9), "\u202641824MiB");
  EXPECT_EQ(display_width(pad_left("1073741824MiB", 9)), 9U);
  EXPECT_EQ(fit_text_end("12345", 1), "\u2026");
  EXPECT_EQ(fit_text_end("12345", 0), "");
  // Never splits a code point, and cleans what it keeps.
  EXPECT_EQ(fit_text_end("\xC3\xA9\xC3\xA9\xC3\xA9", 2), "\u2026\xC3\xA9");
  EXPECT_EQ(fit_text_end("1\x1b[31m2", 6), "\u2026[31m2");
  EXPECT_EQ(fit_text_end("1\x1b"
                         "2",
                         5),
            "1?2");
}

TEST(TextCells, PaddingReachesTheExactWidth) {
  EXPECT_EQ(pad_left("42", 5), "   42");
  EXPECT_EQ(pad_right("\xC3\xA9", 3), "\xC3\xA9  ");
  EXPECT_EQ(pad_right("toolongtext", 6), "too...");
}

TEST(TextCells, ControlCharactersBecomeQuestionMarks) {
  EXPECT_EQ(fit_text("a\x1b[31mb\tc\x7f", 20), "a?[31mb?c?");
}

TEST(TextCells, InvalidUtf8AndC1ControlsNeverReachTheTerminal) {
  // A lone lead byte would swallow the next cell; U+009B is CSI to many terminals.
  EXPECT_EQ(fit_text("a\xC3", 10), "a\xEF\xBF\xBD");
  EXPECT_EQ(display_width(pad_right("\xFF\xFE", 4)), 4U);
  EXPECT_EQ(fit_text(std::string("x\xC2\x9B") + "31m", 10), "x?31m");
  EXPECT_EQ(fit_text("caf\xC3\xA9", 10), "caf\xC3\xA9") << "valid text is untouched";
}

TEST(TextCells, WrapBreaksAtSpacesAndCutsLongWords) {
  EXPECT_EQ(wrap_text("one two three four", 9),
            (std::vector<std::string>{"one two", "three", "four"}));
  EXPECT_EQ(wrap_text("", 5), (std::vector<std::string>{""}));
  EXPECT_EQ(wrap_text("abcdefghijkl x", 6), (std::vector<std::string>{"abc...", "x"}));
}

TEST(TextCells, StripAnsiRemovesColourOnly) {
  EXPECT_EQ(strip_ansi("\x1b[1mbold\x1b[0m plain"), "bold plain");
  EXPECT_EQ(strip_ansi("no escapes"), "no escapes");
}

}  // namespace
}  // namespace vramscope::report
