// cli/cmd_top.cpp -- `vramscope top`: the live view of every GPU and process, or of a recording
//
// Sampling and drawing have separate deadlines in one loop: samples are taken every --interval
// (down to 10 ms) and all feed the history, while the screen is redrawn at most every 100 ms, or
// at once after a key. getch() sleeps until the nearer deadline, so an idle view costs nothing.
#include <algorithm>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "commands.hpp"
#include "file_args.hpp"
#include "ncurses_screen.hpp"
#include "top_session.hpp"
#include "validators.hpp"
#include "vramscope/backends/open_sampler.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/status.hpp"
#include "vramscope/units.hpp"
#include "vramscope/view/render.hpp"

namespace vramscope::cli {

namespace {

constexpr int64_t min_top_interval_ns = 10'000'000;
constexpr int64_t max_top_interval_ns = 60'000'000'000;
/// The screen is redrawn at most this often (~10 Hz): enough for the eye, cheap for the CPU.
constexpr int64_t redraw_period_ns = 100'000'000;

struct TopOptions {
  std::string interval = "250ms";
  std::string replay;
  double speed = 1.0;
  bool once = false;
  std::string sort = "memory";
  std::string filter;
  bool no_unicode = false;
};

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  return (end != text && *end == '\0' && value > 0 && value < 10000) ? static_cast<int>(value)
                                                                     : fallback;
}

/// Applies a key that is the same in live and replay mode. Returns false when the view should
/// quit.
bool handle_view_key(const Key& key, view::ViewModel& model, int page_rows) {
  if (model.filter_editing) {
    std::string filter = model.filter();
    if (key.code == KeyCode::Enter) {
      model.filter_editing = false;
    } else if (key.code == KeyCode::Escape) {
      model.filter_editing = false;
      filter.clear();
    } else if (key.code == KeyCode::Backspace && !filter.empty()) {
      // Drop one UTF-8 code point, not one byte.
      do {
        filter.pop_back();
      } while (!filter.empty() && (static_cast<unsigned char>(filter.back()) & 0xC0U) == 0x80U);
    } else if (key.code == KeyCode::Char) {
      view::append_utf8(filter, key.ch);
    }
    model.set_filter(filter);
    return true;
  }
  switch (key.code) {
    case KeyCode::Escape:
      if (!model.help_visible) return false;
      model.help_visible = false;
      return true;
    case KeyCode::Up:
      model.move_selection(-1);
      return true;
    case KeyCode::Down:
      model.move_selection(1);
      return true;
    case KeyCode::PageUp:
      model.move_selection(-page_rows);
      return true;
    case KeyCode::PageDown:
      model.move_selection(page_rows);
      return true;
    case KeyCode::Home:
      model.select_first();
      return true;
    case KeyCode::End:
      model.select_last();
      return true;
    default:
      break;
  }
  if (key.code != KeyCode::Char) return true;
  switch (key.ch) {
    case U'q':
    case U'Q':
      return false;
    case U'?':
    case U'h':
      model.help_visible = !model.help_visible;
      break;
    case U's':
      model.cycle_sort_key();
      break;
    case U'/':
      model.filter_editing = true;
      break;
    default:
      break;
  }
  return true;
}

int run_interactive(TopSource& source, view::ViewModel& model, bool unicode) {
  NcursesScreen screen(true);
  const bool use_unicode = unicode && NcursesScreen::locale_is_utf8();
  int64_t last_draw_ns = 0;
  bool dirty = true;
  while (!quit_requested()) {
    int64_t now = monotonic_ns();
    if (source.update(model, now)) dirty = true;
    if (dirty && now - last_draw_ns >= redraw_period_ns) {
      view::Canvas canvas(screen.width(), screen.height(), use_unicode);
      view::render(model, canvas);
      screen.blit(canvas);
      last_draw_ns = now;
      dirty = false;
    }
    // Sleep in getch until the next sample is due or a pending redraw may happen.
    now = monotonic_ns();
    int64_t wake = now + 1'000'000'000;
    if (const auto due = source.next_due_ns()) wake = std::min(wake, *due);
    if (dirty) wake = std::min(wake, last_draw_ns + redraw_period_ns);
    const auto timeout_ms =
        static_cast<int>(std::clamp<int64_t>((wake - now + 999'999) / 1'000'000, 0, 1000));
    const Key key = screen.read_key(timeout_ms);
    if (key.code == KeyCode::None) continue;
    now = monotonic_ns();
    const int page_rows = std::max(1, screen.height() / 2);
    bool handled = false;
    if (key.code == KeyCode::Char || key.code == KeyCode::Left || key.code == KeyCode::Right) {
      handled = !model.filter_editing && source.on_key(key.ch, key.code == KeyCode::Left,
                                                       key.code == KeyCode::Right, model, now);
    }
    if (!handled && !handle_view_key(key, model, page_rows)) return ExitOk;
    dirty = true;
    last_draw_ns = 0;  // a key is answered at once, not at the next redraw slot
  }
  return ExitOk;
}

int run_once(view::ViewModel& model, bool unicode) {
  const int width = env_int("COLUMNS", 100);
  // Tall enough for every GPU (two lines each) and every process row, unless $LINES says.
  const int wanted =
      3 + 2 * static_cast<int>(model.gpus().size()) + static_cast<int>(model.rows().size()) + 1;
  const int height = env_int("LINES", std::clamp(wanted, view::min_height_cells, 1000));
  view::Canvas canvas(width, height, unicode);
  view::render(model, canvas);
  std::fputs(canvas.to_text().c_str(), stdout);
  return std::fflush(stdout) == 0 ? ExitOk : ExitError;
}

int run_top(const TopOptions& options) {
  std::setlocale(LC_ALL, "");
  const auto interval_ns = parse_duration_ns(options.interval);
  if (!interval_ns || *interval_ns < min_top_interval_ns || *interval_ns > max_top_interval_ns) {
    throw Error("--interval: expected a duration from 10ms to 60s (e.g. 250ms, 1s), got \"" +
                    options.interval + "\"",
                ExitUsage);
  }
  view::ViewModel model;
  model.interval_ns = *interval_ns;
  model.set_sort_key(view::parse_sort_key(options.sort).value_or(view::SortKey::Memory));
  model.set_filter(options.filter);

  std::unique_ptr<TopSource> source;
  if (!options.replay.empty()) {
    source = make_replay_source(options.replay, options.speed, options.once, model);
  } else {
    source = make_live_source(open_sampler(), *interval_ns);
  }
  const bool unicode = !options.no_unicode && NcursesScreen::locale_is_utf8();
  if (options.once) {
    // One frame printed as text: no key does anything there, so no key hints.
    model.compact_only = true;
    model.key_hints = false;
    source->update(model, monotonic_ns());
    return run_once(model, unicode);
  }
  return run_interactive(*source, model, !options.no_unicode);
}

}  // namespace

Command add_top_command(CLI::App& app) {
  auto options = std::make_shared<TopOptions>();
  CLI::App* top = app.add_subcommand(
      "top",
      "Live view of every GPU and process: the driver's memory (NVML) joined with PyTorch's "
      "allocator (processes started with `vramscope run` or the Python agent).");
  top->add_option("--interval", options->interval,
                  "Sampling interval, 10ms to 60s; every sample feeds the history even when the "
                  "screen redraws less often")
      ->default_val("250ms");
  top->add_option("--replay", options->replay,
                  "Show a recording made by `vramscope record` instead of sampling, at its "
                  "recorded pace")
      ->check(readable_file());
  top->add_option("--speed", options->speed, "Replay speed, 0.25 to 64")
      ->default_val(1.0)
      ->check(finite_number())
      ->check(CLI::Range(view::min_replay_speed, view::max_replay_speed));
  top->add_flag("--once", options->once,
                "Print one frame as text and exit (no terminal needed; width from $COLUMNS, "
                "else 100); with --replay, the frame at the recording's peak");
  top->add_option("--sort", options->sort, "Process order: memory, pid, allocated, gpu, command")
      ->default_val("memory")
      ->check(CLI::IsMember({"memory", "pid", "allocated", "gpu", "command"}));
  top->add_option("--filter", options->filter,
                  "Show only processes whose command, user or pid contains TEXT");
  top->add_flag("--no-unicode", options->no_unicode,
                "ASCII only: no box lines or block glyphs (also automatic outside UTF-8 locales)");
  top->footer(
      "Keys: q/Esc quit, ? help, s next sort, / filter, arrows select, space pause.\n"
      "Replay: space play/pause, left/right or ,/. step, +/- speed, g/G first/last sample.\n"
      "A selected process that tracks categories (Monitor(model=...)) shows its last step's\n"
      "peak by category above the keys: params, grads, optim, activ, temp, other.\n"
      "A process that polls (no allocator events: no agent library for its torch, or a\n"
      "cudaMallocAsync allocator) shows its PEAK as ≥ (sampled, at least that) and a line\n"
      "above the keys: why it polls and the fix, as the process said it.\n"
      "Colours follow the terminal; NO_COLOR=1 turns them off.");
  return {top, [options] { return run_top(*options); }};
}

}  // namespace vramscope::cli
