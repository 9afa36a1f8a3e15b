// src/report/include/vramscope/report/text_cells.hpp -- fixed-width text cells for terminal tables (UTF-8 and escape safe)
//
// Text from other processes (command lines, user names) reaches the terminal through these
// helpers only: control characters become '?' so that a crafted argv cannot move the cursor or
// change colours, and widths count code points, not bytes, so UTF-8 names do not break columns.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vramscope::report {

/// Columns `text` occupies: one per UTF-8 code point (wide CJK glyphs are counted as one).
std::size_t display_width(std::string_view text);

/// `text` with control characters replaced by '?', cut to at most `width` columns; a cut text
/// ends with "..." so the reader knows there is more.
std::string fit_text(std::string_view text, std::size_t width);

/// fit_text, then padded with spaces on the right to exactly `width` columns.
std::string pad_right(std::string_view text, std::size_t width);

/// `text` as fit_text() cleans it, cut to at most `width` columns keeping its end: a cut text
/// starts with "…" (U+2026), so that a number keeps its last digits and its unit
/// ("…41824MiB"), never a prefix that reads as another number.
std::string fit_text_end(std::string_view text, std::size_t width);

/// fit_text_end, then padded with spaces on the left to exactly `width` columns: the one
/// right-aligned cell of every text table (docs/security.md).
std::string pad_left(std::string_view text, std::size_t width);

/// `text` (sanitised) broken at spaces into lines of at most `width` columns; a word longer
/// than `width` is cut. Never returns an empty vector.
std::vector<std::string> wrap_text(std::string_view text, std::size_t width);

/// Removes ANSI SGR sequences ("\x1b[...m"): what a line looks like without colour.
std::string strip_ansi(std::string_view text);

}  // namespace vramscope::report
