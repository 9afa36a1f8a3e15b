// cli/terminal.hpp -- what the CLI needs to know about its terminal: colour and width
#pragma once

#include <cstddef>
#include <string>

namespace vramscope::cli {

/// --color: auto (only on a colour-capable TTY), always, never.
enum class ColorMode { Auto, Always, Never };

/// Parses "auto", "always", "never"; throws vramscope::Error (usage) otherwise.
ColorMode parse_color_mode(const std::string& text);

/// Should output on `fd` be coloured? Auto means: `fd` is a TTY, NO_COLOR is unset or empty and
/// TERM is not "dumb". NO_COLOR also wins over auto only; --color always is explicit.
bool use_color(ColorMode mode, int fd);

/// Columns of the terminal on `fd`, or 80 when `fd` is not a terminal (pipes get a stable width).
std::size_t terminal_columns(int fd);

}  // namespace vramscope::cli
