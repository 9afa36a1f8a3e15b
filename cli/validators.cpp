// cli/validators.cpp -- strict number and value validators for CLI11 options
#include "validators.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace vramscope::cli {

std::optional<uint64_t> parse_strict_decimal(std::string_view text, uint64_t maximum) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value > maximum) return std::nullopt;
  return value;
}

CLI::Validator count_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!parse_strict_decimal(text, UINT64_MAX)) {
          return "expected a whole number from 0 to 18446744073709551615, got '" + text + "'";
        }
        return {};
      },
      "", "count_number");
}

CLI::Validator finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
          return "expected a finite number, got '" + text + "'";
        }
        return {};
      },
      "", "finite_number");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? std::string("expected a value, got an empty string") : std::string();
      },
      "", "non_empty");
}

}  // namespace vramscope::cli
