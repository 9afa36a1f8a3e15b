// cli/ncurses_screen.cpp -- the terminal under `vramscope top`: copies canvas diffs, reads keys
#include "ncurses_screen.hpp"

#include <langinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

// ncurses defines macros (OK, ERR, timeout, clear…) that collide with ordinary names; keep its
// include last and in this file only.
#include <ncurses.h>

#include "vramscope/status.hpp"

namespace vramscope::cli {

namespace {

volatile std::sig_atomic_t g_quit_signal = 0;

extern "C" void on_quit_signal(int /*signal*/) { g_quit_signal = 1; }

short curses_color(view::Color color) {
  switch (color) {
    case view::Color::Default:
      return -1;
    case view::Color::Black:
      return COLOR_BLACK;
    case view::Color::Red:
      return COLOR_RED;
    case view::Color::Green:
      return COLOR_GREEN;
    case view::Color::Yellow:
      return COLOR_YELLOW;
    case view::Color::Blue:
      return COLOR_BLUE;
    case view::Color::Magenta:
      return COLOR_MAGENTA;
    case view::Color::Cyan:
      return COLOR_CYAN;
    case view::Color::White:
      return COLOR_WHITE;
  }
  return -1;
}

bool colors_allowed(bool want_colors) {
  if (!want_colors || std::getenv("NO_COLOR") != nullptr) return false;
  const char* term = std::getenv("TERM");
  return term == nullptr || std::strcmp(term, "dumb") != 0;
}

}  // namespace

bool quit_requested() { return g_quit_signal != 0; }

struct NcursesScreen::State {
  bool colors = false;
  bool unicode = false;
  /// Colour pairs are allocated on first use: terminals with 8 colours offer only 64.
  std::map<std::pair<short, short>, short> pairs;
  /// What the terminal shows now, to diff the next frame against.
  view::Canvas shown{0, 0};

  attr_t attributes(const view::Style& style) {
    attr_t attrs = A_NORMAL;
    if (style.attrs & view::AttrBold) attrs |= A_BOLD;
    if (style.attrs & view::AttrDim) attrs |= A_DIM;
    if (style.attrs & view::AttrReverse) attrs |= A_REVERSE;
    if (style.attrs & view::AttrUnderline) attrs |= A_UNDERLINE;
    return attrs;
  }

  short pair_for(const view::Style& style) {
    if (!colors) return 0;
    const std::pair<short, short> key{curses_color(style.fg), curses_color(style.bg)};
    if (key.first == -1 && key.second == -1) return 0;
    const auto it = pairs.find(key);
    if (it != pairs.end()) return it->second;
    const auto next = static_cast<short>(pairs.size() + 1);
    if (next >= COLOR_PAIRS) return 0;
    init_pair(next, key.first, key.second);
    pairs.emplace(key, next);
    return next;
  }
};

NcursesScreen::NcursesScreen(bool want_colors) : m_state(std::make_unique<State>()) {
  if (isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0) {
    throw Error("top needs a terminal; use `vramscope top --once` to print one frame", ExitUsage);
  }
  // Our handlers are installed before initscr so that ncurses keeps them. No SA_RESTART: the
  // blocking read returns and the main loop sees the flag at once.
  struct sigaction action {};
  action.sa_handler = on_quit_signal;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);

  m_state->unicode = locale_is_utf8();
  if (initscr() == nullptr) throw Error("cannot initialise the terminal (ncurses)");
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);  // Esc quits; the default second-long wait for a sequence feels broken
  if (colors_allowed(want_colors) && has_colors()) {
    start_color();
    use_default_colors();
    m_state->colors = true;
  }
}

NcursesScreen::~NcursesScreen() {
  curs_set(1);
  endwin();
}

int NcursesScreen::width() const { return COLS; }
int NcursesScreen::height() const { return LINES; }

bool NcursesScreen::locale_is_utf8() {
  const char* codeset = nl_langinfo(CODESET);
  return codeset != nullptr &&
         (std::strcmp(codeset, "UTF-8") == 0 || std::strcmp(codeset, "utf8") == 0);
}

void NcursesScreen::blit(const view::Canvas& frame) {
  State& s = *m_state;
  const bool resized = frame.width() != s.shown.width() || frame.height() != s.shown.height();
  if (resized) clearok(stdscr, TRUE);
  for (const auto& span : frame.diff(s.shown)) {
    for (int x = span.x; x < span.x + span.width; ++x) {
      const view::Cell& cell = frame.at(x, span.y);
      const short pair = s.pair_for(cell.style);
      const attr_t attrs = s.attributes(cell.style);
      // Writing the bottom-right cell scrolls some terminals; ncurses reports ERR there and
      // leaves the screen intact, which is what we want.
      if (cell.glyph < 0x80 || !s.unicode) {
        const chtype ch = cell.glyph < 0x80 ? static_cast<chtype>(cell.glyph) : '?';
        mvaddch(span.y, x, ch | attrs | static_cast<chtype>(COLOR_PAIR(pair)));
      } else {
        wchar_t text[2] = {static_cast<wchar_t>(cell.glyph), L'\0'};
        cchar_t wide{};
        setcchar(&wide, text, attrs, pair, nullptr);
        mvadd_wch(span.y, x, &wide);
      }
    }
  }
  s.shown = frame;
  wnoutrefresh(stdscr);
  doupdate();
}

Key NcursesScreen::read_key(int timeout_ms) {
  wtimeout(stdscr, timeout_ms < 0 ? 0 : timeout_ms);
  wint_t ch = 0;
  const int kind = wget_wch(stdscr, &ch);
  if (kind == ERR) return {};
  if (kind == KEY_CODE_YES) {
    switch (ch) {
      case KEY_RESIZE:
        m_state->shown = view::Canvas(0, 0);  // force a full redraw at the new size
        return {KeyCode::Resize};
      case KEY_UP:
        return {KeyCode::Up};
      case KEY_DOWN:
        return {KeyCode::Down};
      case KEY_LEFT:
        return {KeyCode::Left};
      case KEY_RIGHT:
        return {KeyCode::Right};
      case KEY_PPAGE:
        return {KeyCode::PageUp};
      case KEY_NPAGE:
        return {KeyCode::PageDown};
      case KEY_HOME:
        return {KeyCode::Home};
      case KEY_END:
        return {KeyCode::End};
      case KEY_ENTER:
        return {KeyCode::Enter};
      case KEY_BACKSPACE:
        return {KeyCode::Backspace};
      default:
        return {};
    }
  }
  switch (ch) {
    case 27:
      return {KeyCode::Escape};
    case '\r':
    case '\n':
      return {KeyCode::Enter};
    case 127:
    case 8:
      return {KeyCode::Backspace};
    default:
      break;
  }
  if (ch < 0x20) return {};
  return {KeyCode::Char, static_cast<char32_t>(ch)};
}

}  // namespace vramscope::cli
