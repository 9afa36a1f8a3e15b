// cli/ncurses_screen.hpp -- the terminal under `vramscope top`: copies canvas diffs, reads keys
//
// The only code that includes <ncurses.h> is ncurses_screen.cpp; everything above it draws into
// a view::Canvas. Signal handlers only set a flag (quit_requested()); the terminal is restored
// by the destructor on every exit path, including exceptions.
#pragma once

#include <memory>

#include "vramscope/view/canvas.hpp"

namespace vramscope::cli {

/// What a key press means to the live view.
enum class KeyCode {
  /// No key before the timeout (or a key we do not use).
  None,
  /// The terminal changed size.
  Resize,
  /// A printable character, in Key::ch.
  Char,
  Up,
  Down,
  Left,
  Right,
  PageUp,
  PageDown,
  Home,
  End,
  Escape,
  Enter,
  Backspace,
};

/// One key press.
struct Key {
  KeyCode code = KeyCode::None;
  /// The character for KeyCode::Char.
  char32_t ch = 0;
};

/// Has SIGINT, SIGTERM or SIGHUP arrived since the screen was opened?
bool quit_requested();

/// A full-screen ncurses session.
class NcursesScreen {
 public:
  /// Takes over the terminal. Colours are used only when `want_colors`, the terminal has them,
  /// NO_COLOR is unset and TERM is not "dumb". Throws vramscope::Error when stdin/stdout is not
  /// a terminal or ncurses cannot start.
  explicit NcursesScreen(bool want_colors);
  ~NcursesScreen();
  NcursesScreen(const NcursesScreen&) = delete;
  NcursesScreen& operator=(const NcursesScreen&) = delete;

  /// Current terminal size in cells.
  int width() const;
  int height() const;
  /// Does the locale encode UTF-8, so that box and block glyphs can be shown?
  static bool locale_is_utf8();
  /// Draws the cells of `frame` that differ from the previous blit (all of them after a resize).
  void blit(const view::Canvas& frame);
  /// Waits up to `timeout_ms` (0: just checks) for a key.
  Key read_key(int timeout_ms);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace vramscope::cli
