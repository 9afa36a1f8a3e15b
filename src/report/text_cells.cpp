// src/report/text_cells.cpp -- width-aware, control-character-safe text cells
#include "vramscope/report/text_cells.hpp"

#include "vramscope/core/utf8.hpp"

namespace vramscope::report {
namespace {

bool is_continuation(unsigned char c) { return (c & 0xC0U) == 0x80U; }

bool is_control(unsigned char c) { return c < 0x20U || c == 0x7FU; }

/// Bytes of `text` that make up its first `columns` code points.
std::size_t prefix_bytes(std::string_view text, std::size_t columns) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (is_continuation(static_cast<unsigned char>(text[i]))) continue;
    if (seen == columns) return i;
    ++seen;
  }
  return text.size();
}

/// Bytes of `text` before its last `columns` code points.
std::size_t suffix_start(std::string_view text, std::size_t columns) {
  if (columns == 0) return text.size();
  std::size_t seen = 0;
  for (std::size_t i = text.size(); i > 0; --i) {
    if (is_continuation(static_cast<unsigned char>(text[i - 1]))) continue;
    if (++seen == columns) return i - 1;
  }
  return 0;
}

std::string sanitize(std::string_view text) {
  // Ill-formed UTF-8 first becomes U+FFFD: a stray lead byte would otherwise swallow the next
  // cell's bytes on the terminal and throw every width count off.
  std::string clean = to_valid_utf8(text);
  for (std::size_t i = 0; i < clean.size(); ++i) {
    auto& c = reinterpret_cast<unsigned char&>(clean[i]);
    if (is_control(c)) c = '?';
    // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F): U+009B is CSI to many terminals.
    if (c == 0xC2U && i + 1 < clean.size() && static_cast<unsigned char>(clean[i + 1]) <= 0x9FU) {
      clean.replace(i, 2, "?");
    }
  }
  return clean;
}

}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (char c : text) {
    if (!is_continuation(static_cast<unsigned char>(c))) ++width;
  }
  return width;
}

std::string fit_text(std::string_view text, std::size_t width) {
  std::string clean = sanitize(text);
  if (display_width(clean) <= width) return clean;
  if (width <= 3) return clean.substr(0, prefix_bytes(clean, width));
  return clean.substr(0, prefix_bytes(clean, width - 3)) + "...";
}

std::string pad_right(std::string_view text, std::size_t width) {
  std::string cell = fit_text(text, width);
  cell.append(width - display_width(cell), ' ');
  return cell;
}

std::string fit_text_end(std::string_view text, std::size_t width) {
  std::string clean = sanitize(text);
  if (display_width(clean) <= width) return clean;
  if (width == 0) return "";
  // U+2026, one column: the digits that tell two large numbers apart are the last ones.
  return "\u2026" + clean.substr(suffix_start(clean, width - 1));
}

std::string pad_left(std::string_view text, std::size_t width) {
  std::string cell = fit_text_end(text, width);
  return std::string(width - display_width(cell), ' ') + cell;
}

std::vector<std::string> wrap_text(std::string_view text, std::size_t width) {
  std::vector<std::string> lines(1);
  const std::string clean = sanitize(text);
  std::size_t at = 0;
  while (at < clean.size()) {
    const std::size_t space = clean.find(' ', at);
    const std::string word =
        clean.substr(at, space == std::string::npos ? std::string::npos : space - at);
    at = space == std::string::npos ? clean.size() : space + 1;
    if (word.empty()) continue;
    std::string& current = lines.back();
    const std::size_t needed =
        display_width(current) + (current.empty() ? 0 : 1) + display_width(word);
    if (needed <= width) {
      if (!current.empty()) current += ' ';
      current += word;
    } else if (current.empty()) {
      current = fit_text(word, width);
    } else {
      lines.push_back(fit_text(word, width));
    }
  }
  return lines;
}

std::string strip_ansi(std::string_view text) {
  std::string plain;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      std::size_t end = text.find('m', i + 2);
      if (end == std::string_view::npos) break;
      i = end;
      continue;
    }
    plain += text[i];
  }
  return plain;
}

}  // namespace vramscope::report
