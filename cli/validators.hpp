// cli/validators.hpp -- strict CLI11 validators for numbers and values CLI11 reads too kindly
//
// CLI11 converts "-1" to 2^64-1 for an unsigned option (strtoull does), takes "" as 0 and a
// number above 2^64 as whatever the conversion left, and CLI::Range lets NaN through (every
// comparison with NaN is false). Validators run on the text before conversion, so these refuse
// such values with a usage error (exit 2) before the option's variable is ever set.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string_view>

namespace vramscope::cli {

/// `text` as a plain decimal number: ASCII digits only (no sign, no spaces, not empty), at most
/// `maximum`. std::stoi and strtoull take " 80" and "+0"; a value we check must be what it says.
std::optional<uint64_t> parse_strict_decimal(std::string_view text, uint64_t maximum);

/// A decimal count: ASCII digits only (no sign, no spaces, not empty), at most 2^64-1.
CLI::Validator count_number();

/// A finite decimal number (rejects "nan", "inf" and anything strtod would not read whole).
CLI::Validator finite_number();

/// Any value except the empty string (an empty --duration would mean "no limit").
CLI::Validator non_empty();

}  // namespace vramscope::cli
