// src/view/canvas.cpp -- an in-memory grid of terminal cells and the primitives that draw into it
#include "vramscope/view/canvas.hpp"

#include <algorithm>
#include <cmath>

namespace vramscope::view {

namespace {

constexpr char32_t replacement = U'?';
constexpr char32_t full_block = U'█';

/// Decodes one code point from `text` at `pos` and advances `pos`; invalid or truncated
/// sequences yield U+FFFD and consume one byte so that decoding always progresses.
char32_t decode_utf8(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  int extra = 0;
  char32_t code = 0;
  if (lead < 0x80U) {
    ++pos;
    return lead;
  }
  if ((lead & 0xE0U) == 0xC0U) {
    extra = 1;
    code = lead & 0x1FU;
  } else if ((lead & 0xF0U) == 0xE0U) {
    extra = 2;
    code = lead & 0x0FU;
  } else if ((lead & 0xF8U) == 0xF0U) {
    extra = 3;
    code = lead & 0x07U;
  } else {
    ++pos;
    return U'\uFFFD';
  }
  if (pos + static_cast<std::size_t>(extra) >= text.size()) {
    ++pos;
    return U'\uFFFD';
  }
  for (int i = 1; i <= extra; ++i) {
    const unsigned char next = byte(pos + i);
    if ((next & 0xC0U) != 0x80U) {
      ++pos;
      return U'\uFFFD';
    }
    code = (code << 6U) | (next & 0x3FU);
  }
  pos += static_cast<std::size_t>(extra) + 1;
  return code;
}

/// Left-aligned block covering `eighths`/8 of a cell (1..8).
char32_t left_block(int eighths) { return static_cast<char32_t>(0x2590 - eighths); }

/// Bottom-aligned block covering `eighths`/8 of a cell (1..8).
char32_t lower_block(int eighths) { return static_cast<char32_t>(0x2580 + eighths); }

}  // namespace

void append_utf8(std::string& out, char32_t code_point) {
  const auto c = static_cast<uint32_t>(code_point);
  if (c < 0x80U) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800U) {
    out.push_back(static_cast<char>(0xC0U | (c >> 6U)));
    out.push_back(static_cast<char>(0x80U | (c & 0x3FU)));
  } else if (c < 0x10000U) {
    out.push_back(static_cast<char>(0xE0U | (c >> 12U)));
    out.push_back(static_cast<char>(0x80U | ((c >> 6U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | (c & 0x3FU)));
  } else {
    out.push_back(static_cast<char>(0xF0U | (c >> 18U)));
    out.push_back(static_cast<char>(0x80U | ((c >> 12U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | ((c >> 6U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | (c & 0x3FU)));
  }
}

int text_width(std::string_view text) {
  int width = 0;
  for (std::size_t pos = 0; pos < text.size(); ++width) decode_utf8(text, pos);
  return width;
}

Canvas::Canvas(int width, int height, bool unicode)
    : m_width(std::max(width, 0)),
      m_height(std::max(height, 0)),
      m_unicode(unicode),
      m_cells(static_cast<std::size_t>(m_width) * static_cast<std::size_t>(m_height)) {}

void Canvas::clear() { std::fill(m_cells.begin(), m_cells.end(), Cell{}); }

char32_t Canvas::printable(char32_t glyph) const {
  if (glyph < 0x20 || (glyph >= 0x7F && glyph < 0xA0)) return replacement;
  if (!m_unicode && glyph >= 0x80) return replacement;
  // Wide (CJK, emoji) and zero-width code points would shift every later cell of the row; a
  // placeholder keeps the grid and the terminal in step.
  if ((glyph >= 0x0300 && glyph < 0x0370) || (glyph >= 0x1100 && glyph < 0x115F) ||
      (glyph >= 0x2E80 && glyph < 0xA4D0) || (glyph >= 0xAC00 && glyph < 0xD7A4) ||
      (glyph >= 0xF900 && glyph < 0xFB00) || (glyph >= 0xFE30 && glyph < 0xFE50) ||
      (glyph >= 0xFF00 && glyph < 0xFF61) || (glyph >= 0xFFE0 && glyph < 0xFFE7) ||
      glyph >= 0x1F000 || glyph == 0x200B || glyph == 0xFEFF || glyph == 0xFFFD) {
    return replacement;
  }
  return glyph;
}

void Canvas::put(const Rect& clip, int x, int y, char32_t glyph, Style style) {
  if (!clip.contains({x, y, 1, 1}) || !bounds().contains({x, y, 1, 1})) return;
  cell(x, y) = {printable(glyph), style};
}

int Canvas::text(const Rect& clip, int x, int y, std::string_view text, Style style) {
  for (std::size_t pos = 0; pos < text.size() && x < clip.right() && x < m_width; ++x) {
    put(clip, x, y, decode_utf8(text, pos), style);
  }
  return x;
}

void Canvas::text_right(const Rect& area, std::string_view text, Style style) {
  const int width = text_width(text);
  this->text(area, area.right() - width, area.y, text, style);
  // Cut on the left, a number reads as a smaller one (step 12345678 as "2345678"): the first
  // cell says that something is missing.
  if (width > area.width && area.width > 0)
    put(area, area.x, area.y, m_unicode ? U'…' : U'<', style);
}

void Canvas::fill(const Rect& area, char32_t glyph, Style style) {
  for (int y = area.y; y < area.bottom(); ++y) {
    for (int x = area.x; x < area.right(); ++x) put(area, x, y, glyph, style);
  }
}

void Canvas::box(const Rect& area, Style style) {
  if (area.width < 2 || area.height < 2) return;
  const char32_t horizontal = m_unicode ? U'─' : U'-';
  const char32_t vertical = m_unicode ? U'│' : U'|';
  for (int x = area.x + 1; x < area.right() - 1; ++x) {
    put(area, x, area.y, horizontal, style);
    put(area, x, area.bottom() - 1, horizontal, style);
  }
  for (int y = area.y + 1; y < area.bottom() - 1; ++y) {
    put(area, area.x, y, vertical, style);
    put(area, area.right() - 1, y, vertical, style);
  }
  put(area, area.x, area.y, m_unicode ? U'┌' : U'+', style);
  put(area, area.right() - 1, area.y, m_unicode ? U'┐' : U'+', style);
  put(area, area.x, area.bottom() - 1, m_unicode ? U'└' : U'+', style);
  put(area, area.right() - 1, area.bottom() - 1, m_unicode ? U'┘' : U'+', style);
}

void Canvas::bar(const Rect& area, std::span<const BarSegment> segments, uint64_t total,
                 Style empty_style) {
  const Rect row = area.row(0);
  if (row.empty()) return;
  const char32_t empty_glyph = m_unicode ? U'·' : U'.';
  fill(row, empty_glyph, empty_style);
  if (total == 0) return;
  // Segment ends in eighths of a cell, from cumulative amounts so that rounding never
  // accumulates across segments.
  const long double scale = static_cast<long double>(row.width) * 8.0L / total;
  std::vector<int> ends;
  long double cumulative = 0;
  for (const auto& segment : segments) {
    cumulative += segment.amount;
    ends.push_back(static_cast<int>(
        std::min<long double>(std::llround(cumulative * scale), row.width * 8.0L)));
  }
  for (int column = 0; column < row.width; ++column) {
    const int lo = column * 8;
    const int hi = lo + 8;
    int best = -1;
    int best_cover = 0;
    int covered = 0;
    int start = 0;
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const int cover = std::max(0, std::min(hi, ends[i]) - std::max(lo, start));
      covered += cover;
      if (cover > 0 && cover >= best_cover) {
        best = static_cast<int>(i);
        best_cover = cover;
      }
      start = std::max(start, ends[i]);
    }
    if (best < 0) continue;
    const BarSegment& segment = segments[static_cast<std::size_t>(best)];
    const int x = row.x + column;
    if (covered == 8) {
      put(row, x, row.y, m_unicode ? segment.glyph : static_cast<char32_t>(segment.ascii),
          segment.style);
    } else if (m_unicode) {
      put(row, x, row.y, left_block(covered), segment.style);
    } else if (covered >= 4) {
      put(row, x, row.y, static_cast<char32_t>(segment.ascii), segment.style);
    }
  }
}

void Canvas::graph(const Rect& area, std::span<const GraphSeries> series) {
  if (area.empty()) return;
  for (const auto& s : series) {
    const std::size_t shown = std::min<std::size_t>(s.values.size(), area.width);
    const std::size_t first = s.values.size() - shown;
    for (std::size_t i = 0; i < shown; ++i) {
      const int x = area.right() - static_cast<int>(shown) + static_cast<int>(i);
      const double value = std::clamp(s.values[first + i], 0.0, 1.0);
      const long eighths = std::lround(value * area.height * 8.0);
      for (int level = 0; level < area.height; ++level) {
        const int k = static_cast<int>(std::clamp<long>(eighths - level * 8L, 0, 8));
        const int y = area.bottom() - 1 - level;
        if (k == 0) break;
        if (!m_unicode) {
          if (k >= 4) put(area, x, y, static_cast<char32_t>(s.ascii), s.style);
          continue;
        }
        Style style = s.style;
        // A partial block over a full block of an earlier series keeps that series visible
        // in the cell's upper part.
        if (k < 8 && cell(x, y).glyph == full_block) style.bg = cell(x, y).style.fg;
        put(area, x, y, k == 8 ? full_block : lower_block(k), style);
      }
    }
  }
}

std::string Canvas::to_text() const {
  std::string out;
  for (int y = 0; y < m_height; ++y) {
    int end = m_width;
    while (end > 0 && at(end - 1, y).glyph == U' ') --end;
    for (int x = 0; x < end; ++x) append_utf8(out, at(x, y).glyph);
    out.push_back('\n');
  }
  return out;
}

std::vector<DirtySpan> Canvas::diff(const Canvas& previous) const {
  std::vector<DirtySpan> spans;
  const bool same_size = previous.m_width == m_width && previous.m_height == m_height;
  for (int y = 0; y < m_height; ++y) {
    int x = 0;
    while (x < m_width) {
      if (same_size && at(x, y) == previous.at(x, y)) {
        ++x;
        continue;
      }
      const int start = x;
      while (x < m_width && (!same_size || !(at(x, y) == previous.at(x, y)))) ++x;
      spans.push_back({start, y, x - start});
    }
  }
  return spans;
}

}  // namespace vramscope::view
