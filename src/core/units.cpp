// src/core/units.cpp -- parsing intervals and sizes, printing bytes and durations
//
// Parsing is exact integer arithmetic (no strtod): "0.1s" must be 100000000 ns, not 99999999,
// and "1e400" or "99999999999h" must be rejected instead of wrapping or becoming infinity.
#include "vramscope/units.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <limits>

namespace vramscope {
namespace {

/// A non-negative decimal number split into its integer and fractional digits.
struct Decimal {
  /// Integer part; parsing fails if it does not fit.
  uint64_t integer = 0;
  /// Fraction as `fraction / 10^fraction_digits` (digits beyond 18 are dropped: they cannot
  /// change a nanosecond or a byte count).
  uint64_t fraction = 0;
  int fraction_digits = 0;
};

constexpr int max_fraction_digits = 18;

// 128-bit intermediates keep "value * unit" exact; __extension__ silences -Wpedantic for it.
__extension__ using U128 = unsigned __int128;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

/// Consumes "123", "1.5", ".5" or "5." from the front of `text`; the rest is the unit.
std::optional<Decimal> take_decimal(std::string_view& text) {
  Decimal out;
  std::size_t pos = 0;
  bool any_digit = false;
  for (; pos < text.size() && is_digit(text[pos]); ++pos) {
    any_digit = true;
    const auto digit = static_cast<uint64_t>(text[pos] - '0');
    if (out.integer > (std::numeric_limits<uint64_t>::max() - digit) / 10) return std::nullopt;
    out.integer = out.integer * 10 + digit;
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    for (; pos < text.size() && is_digit(text[pos]); ++pos) {
      any_digit = true;
      if (out.fraction_digits < max_fraction_digits) {
        out.fraction = out.fraction * 10 + static_cast<uint64_t>(text[pos] - '0');
        ++out.fraction_digits;
      }
    }
  }
  if (!any_digit) return std::nullopt;
  text.remove_prefix(pos);
  return out;
}

/// value * multiplier, rounded down; empty when the result exceeds `limit`.
std::optional<uint64_t> scale(const Decimal& value, uint64_t multiplier, uint64_t limit) {
  U128 pow10 = 1;
  for (int i = 0; i < value.fraction_digits; ++i) pow10 *= 10;
  // integer < 2^64 and multiplier < 2^50, so neither product overflows 128 bits.
  const U128 total = static_cast<U128>(value.integer) * multiplier +
                     static_cast<U128>(value.fraction) * multiplier / pow10;
  if (total > limit) return std::nullopt;
  return static_cast<uint64_t>(total);
}

/// Case-insensitive ASCII comparison for unit suffixes.
bool unit_is(std::string_view unit, std::string_view expected) {
  if (unit.size() != expected.size()) return false;
  for (std::size_t i = 0; i < unit.size(); ++i) {
    const char a = (unit[i] >= 'A' && unit[i] <= 'Z') ? static_cast<char>(unit[i] + 32) : unit[i];
    if (a != expected[i]) return false;
  }
  return true;
}

struct UnitMultiplier {
  std::string_view name;
  uint64_t multiplier;
};

constexpr uint64_t ns_per_us = 1000;
constexpr uint64_t ns_per_ms = 1000 * ns_per_us;
constexpr uint64_t ns_per_s = 1000 * ns_per_ms;

constexpr std::array<UnitMultiplier, 10> duration_units{{
    {"", ns_per_s},  // a bare number is seconds, like sleep(1) and `watch -n`
    {"ns", 1},
    {"us", ns_per_us},
    {"ms", ns_per_ms},
    {"s", ns_per_s},
    {"sec", ns_per_s},
    {"m", 60 * ns_per_s},
    {"min", 60 * ns_per_s},
    {"h", 3600 * ns_per_s},
    {"hr", 3600 * ns_per_s},
}};

constexpr uint64_t kib = 1024;
constexpr std::array<UnitMultiplier, 17> size_units{{
    {"", 1},
    {"b", 1},
    {"k", kib},
    {"kib", kib},
    {"kb", 1000},
    {"m", kib* kib},
    {"mib", kib* kib},
    {"mb", 1000 * 1000},
    {"g", kib* kib* kib},
    {"gib", kib* kib* kib},
    {"gb", 1000 * 1000 * 1000},
    {"t", kib* kib* kib* kib},
    {"tib", kib* kib* kib* kib},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
    {"p", kib* kib* kib* kib* kib},
    {"pib", kib* kib* kib* kib* kib},
    {"pb", 1000ULL * 1000 * 1000 * 1000 * 1000},
}};

template <std::size_t N>
std::optional<uint64_t> parse_with_units(std::string_view text,
                                         const std::array<UnitMultiplier, N>& units,
                                         uint64_t limit) {
  text = trim(text);
  auto value = take_decimal(text);
  if (!value) return std::nullopt;
  const std::string_view unit = trim(text);
  for (const auto& candidate : units) {
    if (unit_is(unit, candidate.name)) return scale(*value, candidate.multiplier, limit);
  }
  return std::nullopt;
}

/// Formats a magnitude in the largest binary unit that keeps it below 1024 after rounding:
/// one decimal below 100 ("3.0 KiB", "81.6 GiB"), none from 100 on ("300 MiB").
std::string format_magnitude(uint64_t bytes) {
  static constexpr std::array<const char*, 7> names{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < kib) return std::to_string(bytes) + " B";
  std::size_t unit = 1;
  U128 divisor = kib;
  while (unit + 1 < names.size() && static_cast<U128>(bytes) >= divisor * kib) {
    divisor *= kib;
    ++unit;
  }
  // Tenths of the unit, rounded half up, in integers so that boundaries are exact.
  U128 tenths = (static_cast<U128>(bytes) * 10 + divisor / 2) / divisor;
  if (tenths >= 10 * kib && unit + 1 < names.size()) {
    divisor *= kib;
    ++unit;
    tenths = (static_cast<U128>(bytes) * 10 + divisor / 2) / divisor;
  }
  char buffer[48];
  if (tenths < 1000) {
    std::snprintf(buffer, sizeof buffer, "%llu.%llu %s",
                  static_cast<unsigned long long>(tenths / 10),
                  static_cast<unsigned long long>(tenths % 10), names[unit]);
  } else {
    const U128 whole = (static_cast<U128>(bytes) + divisor / 2) / divisor;
    std::snprintf(buffer, sizeof buffer, "%llu %s", static_cast<unsigned long long>(whole),
                  names[unit]);
  }
  return buffer;
}

}  // namespace

std::optional<int64_t> parse_duration_ns(std::string_view text) {
  const auto ns = parse_with_units(text, duration_units,
                                   static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!ns) return std::nullopt;
  return static_cast<int64_t>(*ns);
}

std::optional<uint64_t> parse_size_bytes(std::string_view text) {
  return parse_with_units(text, size_units, std::numeric_limits<uint64_t>::max());
}

uint64_t to_mib(uint64_t bytes) {
  // Round up (nvidia-smi's rule, see the header); written so that it cannot overflow.
  return (bytes >> 20U) + ((bytes & ((1ULL << 20U) - 1)) != 0 ? 1U : 0U);
}

std::string format_bytes(uint64_t bytes) { return format_magnitude(bytes); }

std::string format_bytes_delta(int64_t delta_bytes) {
  if (delta_bytes == 0) return "0 B";
  // Negate in unsigned arithmetic so that INT64_MIN has a magnitude too.
  const uint64_t magnitude =
      delta_bytes < 0 ? 0 - static_cast<uint64_t>(delta_bytes) : static_cast<uint64_t>(delta_bytes);
  // Appending (rather than "-" + string) also sidesteps a GCC 12 -Wrestrict false positive.
  std::string out(1, delta_bytes < 0 ? '-' : '+');
  out += format_magnitude(magnitude);
  return out;
}

std::string format_duration_ns(int64_t duration_ns) {
  if (duration_ns < 0) {
    // INT64_MIN has no positive counterpart; one nanosecond less prints the same.
    const int64_t magnitude = duration_ns == std::numeric_limits<int64_t>::min()
                                  ? std::numeric_limits<int64_t>::max()
                                  : -duration_ns;
    std::string out(1, '-');
    out += format_duration_ns(magnitude);
    return out;
  }
  const auto ns = static_cast<uint64_t>(duration_ns);
  char buffer[48];
  if (ns < ns_per_us) {
    std::snprintf(buffer, sizeof buffer, "%llu ns", static_cast<unsigned long long>(ns));
  } else if (ns < ns_per_ms) {
    std::snprintf(buffer, sizeof buffer, "%llu us",
                  static_cast<unsigned long long>(ns / ns_per_us));
  } else if (ns < ns_per_s) {
    std::snprintf(buffer, sizeof buffer, "%llu ms",
                  static_cast<unsigned long long>(ns / ns_per_ms));
  } else if (ns < 60 * ns_per_s - ns_per_s / 20) {
    // Tenths of a second, rounded; 59.95 s and above would print "60.0 s" and becomes "1m00s".
    const uint64_t tenths = (ns + ns_per_s / 20) / (ns_per_s / 10);
    std::snprintf(buffer, sizeof buffer, "%llu.%llu s",
                  static_cast<unsigned long long>(tenths / 10),
                  static_cast<unsigned long long>(tenths % 10));
  } else if (ns < 3600 * ns_per_s) {
    // Below 60 s only the rounding band above lands here; it reads as a full minute.
    const uint64_t seconds = ns < 60 * ns_per_s ? 60 : ns / ns_per_s;
    std::snprintf(buffer, sizeof buffer, "%llum%02llus",
                  static_cast<unsigned long long>(seconds / 60),
                  static_cast<unsigned long long>(seconds % 60));
  } else {
    const uint64_t minutes = ns / (60 * ns_per_s);
    std::snprintf(buffer, sizeof buffer, "%lluh%02llum",
                  static_cast<unsigned long long>(minutes / 60),
                  static_cast<unsigned long long>(minutes % 60));
  }
  return buffer;
}

std::string format_bytes_compact(uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + "B";
  constexpr std::array<char, 5> units{'K', 'M', 'G', 'T', 'P'};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while (value >= 1000.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  char out[16];
  if (value < 99.95) {
    std::snprintf(out, sizeof out, "%.1f%c", value, units[unit]);
  } else {
    std::snprintf(out, sizeof out, "%.0f%c", value, units[unit]);
  }
  return out;
}

std::string format_duration_compact(int64_t duration_ns) {
  const int64_t ms = std::max<int64_t>(duration_ns, 0) / 1'000'000;
  char out[32];
  if (ms < 1000) {
    std::snprintf(out, sizeof out, "%" PRId64 "ms", ms);
  } else if (ms < 60'000) {
    std::snprintf(out, sizeof out, "%" PRId64 "s", ms / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(out, sizeof out, "%" PRId64 "m%02" PRId64 "s", ms / 60'000, ms / 1000 % 60);
  } else {
    std::snprintf(out, sizeof out, "%" PRId64 "h%02" PRId64 "m", ms / 3'600'000, ms / 60'000 % 60);
  }
  return out;
}

}  // namespace vramscope
