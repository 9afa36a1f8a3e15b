// src/view/include/vramscope/view/canvas.hpp -- an in-memory grid of terminal cells and the primitives that draw into it
//
// The renderer draws a whole frame here; the terminal layer copies only the cells that differ
// from the previous frame (diff()), so a redraw never clears the screen and never flickers.
// to_text() turns a frame into plain UTF-8 lines for golden tests and `top --once`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/view/layout.hpp"

namespace vramscope::view {

/// The eight ANSI colours plus the terminal's own default; the terminal layer maps them.
enum class Color : uint8_t { Default, Black, Red, Green, Yellow, Blue, Magenta, Cyan, White };

/// Attribute bits of a cell.
enum Attr : uint8_t {
  AttrNone = 0,
  AttrBold = 1U << 0U,
  AttrDim = 1U << 1U,
  AttrReverse = 1U << 2U,
  AttrUnderline = 1U << 3U,
};

/// Colours and attributes of a cell.
struct Style {
  Color fg = Color::Default;
  Color bg = Color::Default;
  uint8_t attrs = AttrNone;
  bool operator==(const Style&) const = default;
};

/// One terminal cell: a single-width code point and its style.
struct Cell {
  char32_t glyph = U' ';
  Style style;
  bool operator==(const Cell&) const = default;
};

/// A run of changed cells on one row: what the terminal layer must redraw.
struct DirtySpan {
  int x = 0;
  int y = 0;
  int width = 0;
};

/// One part of a horizontal bar.
struct BarSegment {
  /// Size of the part, in the same unit as the bar's total.
  uint64_t amount = 0;
  Style style;
  /// Fill glyph in Unicode mode (the shade tells parts apart without colour).
  char32_t glyph = U'█';
  /// Fill glyph in ASCII mode.
  char ascii = '#';
};

/// One series of a history graph: values in [0, 1] of the graph height, oldest first.
struct GraphSeries {
  std::span<const double> values;
  Style style;
  /// Full-cell glyph in ASCII mode (partial cells round to it or to blank).
  char ascii = '#';
};

/// A grid of cells with clipped drawing primitives. Nothing is ever drawn outside the grid.
class Canvas {
 public:
  /// An empty `width` x `height` grid; `unicode` false makes every primitive ASCII-only.
  Canvas(int width, int height, bool unicode = true);

  int width() const { return m_width; }
  int height() const { return m_height; }
  /// Does this canvas draw box lines, blocks and eighth-blocks rather than ASCII?
  bool unicode() const { return m_unicode; }
  /// The whole grid as a rectangle.
  Rect bounds() const { return {0, 0, m_width, m_height}; }

  /// Resets every cell to a blank with the default style.
  void clear();
  /// The cell at (x, y); (x, y) must be inside the grid.
  const Cell& at(int x, int y) const { return m_cells[index(x, y)]; }
  /// Sets one cell if (x, y) lies inside both `clip` and the grid.
  void put(const Rect& clip, int x, int y, char32_t glyph, Style style);
  /// Writes UTF-8 `text` from (x, y), clipped to `clip`. Control characters and, in ASCII
  /// mode, every non-ASCII code point become '?'. Returns the column after the last cell written.
  int text(const Rect& clip, int x, int y, std::string_view text, Style style);
  /// Writes `text` right-aligned to the right edge of `area`'s first row. Text wider than the
  /// area keeps its right end and starts with an overflow marker ('…', or '<' in ASCII mode).
  void text_right(const Rect& area, std::string_view text, Style style);
  /// Fills `area` with `glyph`.
  void fill(const Rect& area, char32_t glyph, Style style);
  /// Draws a border along the edge of `area` (corners and lines; ASCII '+', '-', '|').
  void box(const Rect& area, Style style);
  /// A horizontal bar over the first row of `area`: segments left to right, scaled so that
  /// `total` fills the row; the end of the last segment is drawn to 1/8 cell in Unicode mode.
  void bar(const Rect& area, std::span<const BarSegment> segments, uint64_t total,
           Style empty_style);
  /// A column graph over `area`, one column per value (the rightmost value is the newest).
  /// Series are drawn in order, so later series overdraw earlier ones; lower eighth-blocks give
  /// 1/8-row resolution in Unicode mode.
  void graph(const Rect& area, std::span<const GraphSeries> series);
  /// Every row as UTF-8 with trailing blanks removed, rows joined by '\n' (ends with '\n').
  std::string to_text() const;
  /// Runs of cells that differ from `previous`; every cell when the sizes differ.
  std::vector<DirtySpan> diff(const Canvas& previous) const;

 private:
  Cell& cell(int x, int y) { return m_cells[index(x, y)]; }
  /// Row-major position of (x, y), computed in size_t: an int product could overflow first.
  std::size_t index(int x, int y) const {
    return static_cast<std::size_t>(y) * static_cast<std::size_t>(m_width) +
           static_cast<std::size_t>(x);
  }
  char32_t printable(char32_t glyph) const;

  int m_width;
  int m_height;
  bool m_unicode;
  std::vector<Cell> m_cells;
};

/// Appends the UTF-8 encoding of `code_point` to `out`.
void append_utf8(std::string& out, char32_t code_point);

/// Number of code points `text` decodes to (invalid bytes count one each), i.e. its width in
/// cells as Canvas::text draws it.
int text_width(std::string_view text);

}  // namespace vramscope::view
