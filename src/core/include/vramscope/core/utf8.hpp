// src/core/include/vramscope/core/utf8.hpp -- making text from other processes valid UTF-8 before it is exported
//
// Command lines, user names and device strings come from other processes and may hold any byte.
// JSON, Prometheus labels and trace files must be valid UTF-8; a reader that meets one bad byte
// may reject the whole document. Every text export passes such text through here (or through
// nlohmann's `error_handler_t::replace`, which makes the same replacements).
#pragma once

#include <string>
#include <string_view>

namespace vramscope {

/// U+FFFD REPLACEMENT CHARACTER, encoded.
inline constexpr std::string_view utf8_replacement = "\xEF\xBF\xBD";

/// Is `text` well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF)?
bool is_valid_utf8(std::string_view text);

/// `text` with every ill-formed sequence replaced by U+FFFD (one per maximal ill-formed
/// subpart, the Unicode-recommended practice); valid text is returned unchanged.
std::string to_valid_utf8(std::string_view text);

/// Serialises an nlohmann JSON value with invalid UTF-8 in strings replaced by U+FFFD instead
/// of throwing (the default handler's type_error would abort the whole document). `indent`
/// < 0 is the compact form. A template so that this header needs no JSON include.
template <typename Json>
std::string json_text(const Json& value, int indent = -1) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace vramscope
