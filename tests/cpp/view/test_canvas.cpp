// tests/cpp/view/test_canvas.cpp -- canvas primitives: clipping, UTF-8, bars, graphs, diffs
#include <gtest/gtest.h>

#include <vector>

#include "vramscope/view/canvas.hpp"

namespace vramscope::view {
namespace {

std::string row_text(const Canvas& canvas, int y) {
  std::string out;
  for (int x = 0; x < canvas.width(); ++x) append_utf8(out, canvas.at(x, y).glyph);
  return out;
}

TEST(Canvas, TextIsClippedToTheRectAndTheGrid) {
  Canvas canvas(10, 2);
  const int end = canvas.text({2, 0, 4, 1}, 0, 0, "abcdefgh", Style{});
  EXPECT_EQ(row_text(canvas, 0), "  cdef    ");
  EXPECT_EQ(end, 6);
  canvas.text(canvas.bounds(), 8, 1, "xyz", Style{});
  EXPECT_EQ(row_text(canvas, 1), "        xy");
  canvas.text(canvas.bounds(), -3, 5, "off the grid", Style{});  // must not crash or write
  EXPECT_EQ(canvas.to_text(), "  cdef\n        xy\n");
}

TEST(Canvas, Utf8IsDecodedAndControlAndWideCharactersArePlaceholders) {
  Canvas canvas(12, 1);
  canvas.text(canvas.bounds(), 0, 0, "é\tü漢\xff!", Style{});
  EXPECT_EQ(row_text(canvas, 0),
            "é?ü?"
            "?!      ");  // split: "??!" is a trigraph
  EXPECT_EQ(text_width("é\tü漢\xff!"), 6);
  Canvas ascii(4, 1, false);
  ascii.text(ascii.bounds(), 0, 0, "aé─b", Style{});
  EXPECT_EQ(ascii.to_text(), "a??b\n");
}

TEST(Canvas, TextRightAlignsToTheEdge) {
  Canvas canvas(8, 1);
  canvas.text_right(canvas.bounds(), "42%", Style{});
  EXPECT_EQ(canvas.to_text(), "     42%\n");
}

TEST(Canvas, TextRightTooWideKeepsItsRightEndBehindAMarker) {
  // A number cut on the left reads as a smaller number: 12345678 must not show as "2345678".
  Canvas canvas(9, 2);
  canvas.text_right({0, 0, 7, 1}, "12345678", Style{});
  EXPECT_EQ(row_text(canvas, 0), "…345678  ");
  canvas.text_right({0, 1, 8, 1}, "12345678", Style{});
  EXPECT_EQ(row_text(canvas, 1), "12345678 ") << "text that fits is not marked";
  Canvas ascii(4, 1, false);
  ascii.text_right(ascii.bounds(), "123456", Style{});
  EXPECT_EQ(ascii.to_text(), "<456\n");
}

TEST(Canvas, BarEndsWithAnEighthBlock) {
  Canvas canvas(4, 1);
  // 3 of 8 units over 4 cells = 1.5 cells: one full cell and a half block.
  const std::vector<BarSegment> segments{{3, Style{}, U'█', '#'}};
  canvas.bar(canvas.bounds(), segments, 8, Style{});
  EXPECT_EQ(row_text(canvas, 0), "█▌··");
  // 1/32 of the total is 1/8 of the first cell.
  const std::vector<BarSegment> tiny{{1, Style{}, U'█', '#'}};
  canvas.bar(canvas.bounds(), tiny, 32, Style{});
  EXPECT_EQ(row_text(canvas, 0), "▏···");
}

TEST(Canvas, BarSegmentsKeepTheirGlyphsAndNeverOverflow) {
  Canvas canvas(10, 1);
  const std::vector<BarSegment> segments{{2, Style{Color::Green}, U'█', '#'},
                                         {3, Style{Color::Yellow}, U'▓', '+'},
                                         {100, Style{Color::Blue}, U'░', '='}};
  canvas.bar(canvas.bounds(), segments, 10, Style{});
  EXPECT_EQ(row_text(canvas, 0), "██▓▓▓░░░░░");
  EXPECT_EQ(canvas.at(2, 0).style.fg, Color::Yellow);
  Canvas ascii(10, 1, false);
  ascii.bar(ascii.bounds(), segments, 10, Style{});
  EXPECT_EQ(row_text(ascii, 0), "##+++=====");
  ascii.bar(ascii.bounds(), segments, 0, Style{});  // unknown total: empty bar, no division
  EXPECT_EQ(row_text(ascii, 0), "..........");
}

TEST(Canvas, AsciiBarRoundsPartialCells) {
  Canvas ascii(4, 1, false);
  const std::vector<BarSegment> half{{5, Style{}, U'█', '#'}};  // 2.5 cells
  ascii.bar(ascii.bounds(), half, 8, Style{});
  EXPECT_EQ(row_text(ascii, 0), "###.");
}

TEST(Canvas, GraphDrawsNewestValuesOnTheRightWithEighthRows) {
  Canvas canvas(4, 2);
  const std::vector<double> values{1.0, 0.5, 0.0, 0.25, 0.75};  // 5 values, 4 columns
  const std::vector<GraphSeries> series{{values, Style{}, '#'}};
  canvas.graph(canvas.bounds(), series);
  EXPECT_EQ(canvas.to_text(), "   ▄\n█ ▄█\n");
  Canvas ascii(4, 2, false);
  ascii.graph(ascii.bounds(), series);
  EXPECT_EQ(ascii.to_text(), "   #\n# ##\n");
}

TEST(Canvas, GraphPartialBlockOverAnEarlierSeriesKeepsItsColourBehind) {
  Canvas canvas(1, 1);
  const std::vector<double> used{1.0};
  const std::vector<double> torch{0.5};
  const std::vector<GraphSeries> series{{used, Style{Color::Blue}, ':'},
                                        {torch, Style{Color::Green}, '#'}};
  canvas.graph(canvas.bounds(), series);
  EXPECT_EQ(canvas.at(0, 0).glyph, U'▄');
  EXPECT_EQ(canvas.at(0, 0).style.fg, Color::Green);
  EXPECT_EQ(canvas.at(0, 0).style.bg, Color::Blue);
}

TEST(Canvas, BoxDrawsCornersAndEdges) {
  Canvas canvas(4, 3);
  canvas.box(canvas.bounds(), Style{});
  EXPECT_EQ(canvas.to_text(), "┌──┐\n│  │\n└──┘\n");
  Canvas ascii(3, 2, false);
  ascii.box(ascii.bounds(), Style{});
  EXPECT_EQ(ascii.to_text(), "+-+\n+-+\n");
}

TEST(Canvas, DiffReportsOnlyChangedRuns) {
  Canvas before(10, 3);
  Canvas after(10, 3);
  EXPECT_TRUE(after.diff(before).empty());
  after.text(after.bounds(), 2, 1, "abc", Style{});
  after.put(after.bounds(), 9, 2, U'x', Style{});
  after.put(after.bounds(), 0, 0, U' ', Style{Color::Red});  // style-only change counts
  const auto spans = after.diff(before);
  ASSERT_EQ(spans.size(), 3U);
  EXPECT_EQ(spans[0].x, 0);
  EXPECT_EQ(spans[0].width, 1);
  EXPECT_EQ(spans[1].x, 2);
  EXPECT_EQ(spans[1].y, 1);
  EXPECT_EQ(spans[1].width, 3);
  EXPECT_EQ(spans[2].x, 9);
  EXPECT_EQ(spans[2].y, 2);
}

TEST(Canvas, DiffAfterAResizeCoversEveryCell) {
  const Canvas before(5, 2);
  const Canvas after(6, 2);
  const auto spans = after.diff(before);
  ASSERT_EQ(spans.size(), 2U);
  EXPECT_EQ(spans[0].width, 6);
  EXPECT_EQ(spans[1].width, 6);
}

}  // namespace
}  // namespace vramscope::view
