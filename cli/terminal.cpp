// cli/terminal.cpp -- colour decision (NO_COLOR, TERM=dumb, TTY) and terminal width
#include "terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "vramscope/status.hpp"

namespace vramscope::cli {

ColorMode parse_color_mode(const std::string& text) {
  if (text == "auto") return ColorMode::Auto;
  if (text == "always") return ColorMode::Always;
  if (text == "never") return ColorMode::Never;
  throw Error("--color must be auto, always or never (got '" + text + "')", ExitUsage);
}

bool use_color(ColorMode mode, int fd) {
  if (mode != ColorMode::Auto) return mode == ColorMode::Always;
  // https://no-color.org: any non-empty value disables colour.
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term == nullptr || std::strcmp(term, "dumb") == 0) return false;
  return isatty(fd) == 1;
}

std::size_t terminal_columns(int fd) {
  struct winsize size {};
  if (isatty(fd) == 1 && ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace vramscope::cli
