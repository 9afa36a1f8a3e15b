// src/view/render.cpp -- one frame of `vramscope top`: header, GPU panels, process table, footer, help
#include "vramscope/view/render.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "vramscope/clock.hpp"
#include "vramscope/units.hpp"

namespace vramscope::view {

using detail::error_style;
using detail::free_style;

namespace {

constexpr Style header_style{Color::Default, Color::Default, AttrReverse};
constexpr Style column_header_style{Color::Default, Color::Default, AttrReverse | AttrBold};
constexpr Style selected_style{Color::Default, Color::Default, AttrReverse};
constexpr Style key_style{Color::Default, Color::Default, AttrBold};
/// The line that says a process's peaks are sampled: a warning, not an error.
constexpr Style polling_style{Color::Yellow, Color::Default, AttrBold};

/// One column of the process table.
struct Column {
  const char* name;
  int width;
  bool right_aligned;
  /// Columns with a higher number are dropped first on narrow terminals; 0 is never dropped.
  int drop_rank;
  /// The sort key this column shows, marked in the column header.
  std::optional<SortKey> sort;
};

constexpr int command_min_width = 10;

std::vector<Column> table_columns(int width) {
  std::vector<Column> columns{{"PID", 7, true, 0, SortKey::Pid},
                              {"USER", 8, false, 3, {}},
                              {"GPU", 4, true, 0, SortKey::Gpu},
                              {"USED", 6, true, 0, SortKey::Memory},
                              {"ALLOC", 6, true, 0, SortKey::Allocated},
                              {"RSRVD", 6, true, 4, {}},
                              {"PEAK", 6, true, 5, {}},
                              {"STEP", 7, true, 6, {}},
                              {"RANK", 4, true, 7, {}},
                              {"COMMAND", 0, false, 0, SortKey::Command}};
  const auto fixed = [&] {
    int sum = 0;
    for (const auto& c : columns) sum += c.width + 1;
    return sum;
  };
  while (fixed() + command_min_width > width) {
    auto it = std::max_element(
        columns.begin(), columns.end(),
        [](const Column& a, const Column& b) { return a.drop_rank < b.drop_rank; });
    if (it->drop_rank == 0) break;
    columns.erase(it);
  }
  columns.back().width = std::max(width - fixed(), 0);
  return columns;
}

std::string optional_bytes(const std::optional<uint64_t>& bytes) {
  return bytes ? format_bytes_compact(*bytes) : "-";
}

/// What marks a sampled peak: the highest value polls saw, so the true peak is at least it
/// (the Python step lines mark theirs the same way).
std::string_view sampled_mark(bool unicode) { return unicode ? "≥" : ">"; }

std::string cell_text(const Column& column, const ProcessRow& row, bool unicode) {
  const std::string_view name = column.name;
  if (name == "PID") return std::to_string(row.pid);
  if (name == "USER") return row.user.empty() ? "-" : row.user;
  if (name == "GPU") return std::to_string(row.gpu_index);
  if (name == "USED") {
    if (!row.in_driver_list) return "?";
    return row.driver_used_bytes ? format_bytes_compact(*row.driver_used_bytes) : "n/a";
  }
  if (name == "ALLOC") return optional_bytes(row.torch_allocated_bytes);
  if (name == "RSRVD") return optional_bytes(row.torch_reserved_bytes);
  if (name == "PEAK") {
    const std::string peak = optional_bytes(row.step_peak_allocated_bytes);
    return row.peaks_sampled && row.step_peak_allocated_bytes
               ? std::string(sampled_mark(unicode)) + peak
               : peak;
  }
  if (name == "STEP") return row.step ? std::to_string(*row.step) : "-";
  if (name == "RANK") return row.rank ? std::to_string(*row.rank) : "-";
  if (!row.command.empty()) return row.command;
  // Explain the gap instead of leaving it blank: inside a container the driver lists host pids,
  // which this pid namespace does not have (and the agents publish the pids they see).
  if (!row.in_driver_list)
    return "(agent only: pid not in the driver's list, other pid namespace?)";
  return "(not visible here: other pid namespace?)";
}

void draw_cell(Canvas& canvas, const Rect& row, int x, const Column& column,
               const std::string& text, Style style) {
  const Rect clip{x, row.y, column.width, 1};
  if (column.right_aligned) {
    canvas.text_right(clip, text, style);
  } else {
    canvas.text(clip, x, row.y, text, style);
  }
}

void render_table(const ViewModel& model, const Rect& area, Canvas& canvas) {
  if (area.empty()) return;
  const auto columns = table_columns(area.width);
  const Rect header = area.row(0);
  canvas.fill(header, U' ', column_header_style);
  int x = area.x;
  int names_end = x;
  for (const auto& column : columns) {
    std::string name = column.name;
    if (column.sort == model.sort_key()) name += canvas.unicode() ? "▼" : "v";
    draw_cell(canvas, header, x, column, name, column_header_style);
    names_end = column.right_aligned ? x + column.width : x + text_width(name);
    x += column.width + 1;
  }
  const auto& rows = model.rows();
  std::string count = std::to_string(rows.size()) + " processes ";
  if (!model.filter().empty()) {
    count = std::to_string(rows.size()) + "/" + std::to_string(model.total_row_count()) +
            " match \"" + model.filter() + "\" ";
  }
  if (names_end + 2 + text_width(count) <= header.right()) {
    canvas.text_right(header, count, column_header_style);
  }

  const int visible = area.height - 1;
  if (rows.empty()) {
    const std::string why =
        model.filter().empty() ? "no process is using a GPU" : "no process matches the filter";
    canvas.text(area.row(1), area.x + 1, area.y + 1, why, free_style);
    return;
  }
  const auto selected = model.selected_index();
  // Scroll just enough to keep the selected row on screen.
  const std::size_t offset = selected && *selected >= static_cast<std::size_t>(visible)
                                 ? *selected - static_cast<std::size_t>(visible) + 1
                                 : 0;
  for (int i = 0; i < visible && offset + i < rows.size(); ++i) {
    const auto& row = rows[offset + static_cast<std::size_t>(i)];
    const Rect line = area.row(1 + i);
    const bool is_selected = selected && *selected == offset + static_cast<std::size_t>(i);
    Style style = is_selected ? selected_style : Style{};
    if (is_selected) canvas.fill(line, U' ', style);
    x = area.x;
    for (const auto& column : columns) {
      Style cell_style = style;
      const std::string_view name = column.name;
      if ((name == "ALLOC" || name == "RSRVD" || name == "PEAK") && row.has_agent) {
        cell_style.fg = detail::allocated_style.fg;
      }
      if (name == "COMMAND" && row.command.empty()) cell_style.attrs |= AttrDim;
      draw_cell(canvas, line, x, column, cell_text(column, row, canvas.unicode()), cell_style);
      x += column.width + 1;
    }
  }
}

/// Short names of the memory categories, indexed by MemoryCategory (as the Python step table).
constexpr std::array<std::string_view, memory_category_count> category_short_names{
    "params", "grads", "optim", "activ", "temp", "other"};

/// The selected row when it has a step breakdown to show.
const ProcessRow* selected_with_categories(const ViewModel& model) {
  const auto selected = model.selected_index();
  if (!selected) return nullptr;
  const ProcessRow& row = model.rows()[*selected];
  return row.step_categories ? &row : nullptr;
}

/// Draws "name value" pairs after `prefix` on one line, whole pairs only, dropped from the right
/// when they do not fit (a pair cut mid-number would be read as a different number).
void render_named_amounts(const std::string& prefix,
                          const std::vector<std::pair<std::string, std::string>>& pairs,
                          const Rect& area, Canvas& canvas) {
  int x = canvas.text(area, area.x, area.y, prefix, detail::title_style);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    // Two cells between pairs, one before the first.
    const int gap = i == 0 ? 1 : 2;
    const auto& [name, value] = pairs[i];
    if (x + gap + text_width(name) + 1 + text_width(value) > area.right()) break;
    x = canvas.text(area, x + gap, area.y, name, Style{});
    x = canvas.text(area, x + 1, area.y, value, detail::allocated_style);
  }
}

/// One line: what the selected process's last step peak was made of.
void render_categories(const ProcessRow& row, const Rect& area, Canvas& canvas) {
  std::vector<std::pair<std::string, std::string>> categories;
  for (std::size_t c = 0; c < memory_category_count; ++c) {
    categories.emplace_back(category_short_names[c],
                            format_bytes_compact((*row.step_categories)[c]));
  }
  render_named_amounts("pid " + std::to_string(row.pid) + " GPU " + std::to_string(row.gpu_index) +
                           " step " + std::to_string(row.categories_step) + " peak " +
                           format_bytes_compact(row.categories_peak_bytes) + ":",
                       categories, area, canvas);
}

/// The selected row when its agent has a settled pairing to name.
const ProcessRow* selected_with_parts(const ViewModel& model) {
  const auto selected = model.selected_index();
  if (!selected) return nullptr;
  const ProcessRow& row = model.rows()[*selected];
  return row.driver_parts ? &row : nullptr;
}

/// One line: what the selected process's non-PyTorch bytes are, at the agent's last settled
/// pairing ("pid 4242 GPU 0 non-PyTorch: context 614M  other 64M  NCCL in other  private pools
/// 34M").
void render_parts(const ProcessRow& row, const Rect& area, Canvas& canvas) {
  const DriverBreakdown& b = *row.driver_parts;
  std::vector<std::pair<std::string, std::string>> parts = {
      {"context", format_bytes_compact(b.context_bytes)},
      {"other", b.other_bytes ? format_bytes_compact(*b.other_bytes) : std::string("?")}};
  if (b.nccl_bytes) {
    parts.emplace_back("NCCL", format_bytes_compact(*b.nccl_bytes));
  } else if (b.nccl_version != 0) {
    parts.emplace_back("NCCL", "in other");
  }
  if (b.private_pool_bytes && *b.private_pool_bytes > 0) {
    parts.emplace_back("private pools", format_bytes_compact(*b.private_pool_bytes));
  }
  render_named_amounts(
      "pid " + std::to_string(row.pid) + " GPU " + std::to_string(row.gpu_index) + " non-PyTorch:",
      parts, area, canvas);
}

/// The row whose polling the polling line explains: the selected one when it polls, else the
/// first shown that does; null when no shown row polls. `others` counts the other polling
/// processes shown.
const ProcessRow* polling_row(const ViewModel& model, std::size_t& others) {
  const auto& rows = model.rows();
  const ProcessRow* chosen = nullptr;
  if (const auto selected = model.selected_index(); selected && rows[*selected].peaks_sampled) {
    chosen = &rows[*selected];
  }
  std::vector<uint32_t> pids;
  for (const ProcessRow& row : rows) {
    if (!row.peaks_sampled) continue;
    if (chosen == nullptr) chosen = &row;
    if (row.pid != chosen->pid) pids.push_back(row.pid);
  }
  std::sort(pids.begin(), pids.end());
  others = static_cast<std::size_t>(std::unique(pids.begin(), pids.end()) - pids.begin());
  return chosen;
}

/// Most lines the polling text may take: the reason ends in its fix, which a single line of an
/// 80-column terminal would cut off.
constexpr int polling_max_lines = 4;

/// `text` broken at spaces into lines of at most `width` cells (a word wider than that is left
/// whole, for the canvas to clip at the edge).
std::vector<std::string> wrap_words(std::string_view text, int width) {
  std::vector<std::string> lines(1);
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    std::string& line = lines.back();
    if (!line.empty() && text_width(line) + 1 + text_width(word) > width) {
      lines.emplace_back(word);
    } else {
      if (!line.empty()) line += ' ';
      line += word;
    }
  }
  return lines;
}

/// Whose peaks are sampled and why, with the fix the process gave ("pid 4242: polling mode,
/// peaks sampled (≥): no C++ compiler ...; install one (...)"), wrapped onto the last lines of
/// `table` (up to polling_max_lines, a row and the header kept); returns the lines it took.
int render_polling(const ProcessRow& row, std::size_t others, const Rect& table, Canvas& canvas) {
  std::string text = "pid " + std::to_string(row.pid);
  if (others > 0) text += " (+" + std::to_string(others) + " more)";
  text += ": polling mode, peaks sampled (" + std::string(sampled_mark(canvas.unicode())) + ")";
  if (!row.polling_reason.empty()) text += ": " + row.polling_reason;
  std::vector<std::string> lines = wrap_words(text, table.width);
  const int count = std::min({static_cast<int>(lines.size()), polling_max_lines, table.height - 2});
  for (int i = 0; i < count; ++i) {
    const Rect line = table.row(table.height - count + i);
    canvas.text(line, line.x, line.y, lines[static_cast<std::size_t>(i)], polling_style);
  }
  return count;
}

void render_header(const ViewModel& model, const Layout& layout, Canvas& canvas) {
  const Rect& area = layout.header;
  canvas.fill(area, U' ', header_style);
  const std::string sep = canvas.unicode() ? " │ " : " | ";
  std::string left;
  // Where a replay comes from, longest first: the first that fits beside the state and the
  // clock is shown. The state (sample, speed, END, PAUSED) comes first so that an 80-column
  // terminal never loses it to a long file name.
  std::vector<std::string> origins;
  if (model.replay) {
    const auto& r = *model.replay;
    left = "REPLAY" + sep + "sample " + std::to_string(r.position);
    if (r.count) left += "/" + std::to_string(*r.count);
    char speed[32];
    std::snprintf(speed, sizeof speed, "%gx", r.speed);
    left += sep + speed;
    if (r.at_end) left += sep + "END";
    origins = {r.file + ", recorded on " + r.hostname + " at " + local_time_text(r.recorded_ns),
               r.file + " from " + r.hostname, r.file};
  } else {
    const std::size_t gpus = model.gpus().size();
    left = "vramscope" + sep + model.hostname() + sep + "driver " +
           (model.driver_version().empty() ? "?" : model.driver_version()) + sep +
           std::to_string(gpus) + (gpus == 1 ? " GPU" : " GPUs") + sep + "every " +
           format_duration_compact(model.interval_ns);
  }
  if (model.paused) left += sep + "PAUSED";
  if (layout.hidden_gpu_count > 0) {
    left += sep + "+" + std::to_string(layout.hidden_gpu_count) + " GPUs hidden (enlarge)";
  }
  // Live: the time of day is enough; a replay may span days, so it shows the date too.
  std::string right = "waiting for the first sample";
  if (model.has_sample()) {
    right = local_time_text(model.timestamp_ns());
    if (!model.replay) right = right.substr(11);
  }
  if (const auto& oom = model.last_oom()) {
    right = "OOM pid " + std::to_string(oom->pid) + " at " +
            local_time_text(oom->timestamp_ns).substr(11) + "  " + right;
  }
  for (const std::string& origin : origins) {
    if (area.x + 1 + text_width(left + sep + origin) + 2 + text_width(right) < area.right()) {
      left += sep + origin;
      break;
    }
  }
  const int end = canvas.text(area, area.x + 1, area.y, left, header_style);
  if (end + 2 + text_width(right) < area.right()) {
    canvas.text_right(area, right + " ", model.last_oom() ? error_style : header_style);
  }
}

void render_footer(const ViewModel& model, const Rect& area, Canvas& canvas) {
  if (!model.notice.empty() && !model.filter_editing) {
    canvas.text(area, area.x, area.y, model.notice, error_style);
    return;
  }
  if (!model.key_hints) return;
  if (model.filter_editing) {
    const std::string prompt =
        "/" + model.filter() + (canvas.unicode() ? "█" : "_") + "   Enter keep, Esc clear";
    canvas.text(area, area.x, area.y, prompt, key_style);
    return;
  }
  const bool u = canvas.unicode();
  std::vector<std::pair<std::string, std::string>> keys{
      {"q", "quit"},
      {"?", "help"},
      {"s", "sort:" + std::string(sort_key_name(model.sort_key()))},
      {"/", model.filter().empty() ? "filter" : "filter:" + model.filter()}};
  if (model.replay) {
    keys.emplace_back("space", model.paused ? "play" : "pause");
    keys.emplace_back(u ? "←→" : "<>", "step");
    keys.emplace_back("+-", "speed");
    keys.emplace_back("gG", "start/end");
  } else {
    keys.emplace_back(u ? "↑↓" : "up/dn", "select");
    keys.emplace_back("space", model.paused ? "resume" : "pause");
  }
  int x = area.x;
  for (const auto& [key, what] : keys) {
    if (x + text_width(key) + 1 + text_width(what) > area.right()) break;
    x = canvas.text(area, x, area.y, key, key_style);
    x = canvas.text(area, x + 1, area.y, what, Style{}) + 2;
  }
}

void render_help(Canvas& canvas) {
  const bool u = canvas.unicode();
  const std::vector<std::string> lines{
      "vramscope top: keys",
      "",
      "q, Esc        quit",
      "?             show or hide this help",
      "s             next sort: memory pid allocated gpu command",
      "/             filter by command, user or pid",
      std::string(u ? "↑ ↓" : "up dn") + " PgUp PgDn Home End   select a process",
      "space         pause (live) or play/pause (replay)",
      std::string(u ? "← →" : "left right") + " , .   replay: one sample back / forward",
      "+ -           replay speed (0.25x .. 64x)",
      "g G           replay: first / last sample",
      "",
      "bar: alloc = tensors; cached = freed blocks torch keeps;",
      "non-torch = non-PyTorch: CUDA context, NCCL, cuBLAS...;",
      "other = processes without agent; driver = driver-reserved",
      "USED = driver's bytes; ALLOC RSRVD = torch allocator;",
      "PEAK = peak allocated in the last step; " + std::string(sampled_mark(u)) +
          " = sampled by polls",
      "lines above the keys: the selected process's last step",
      "peak by category (when its Monitor was given model=) and",
      "its non-PyTorch bytes: context, other, NCCL, private pools;",
      "a yellow line: whose peaks are sampled, why, the fix",
  };
  int width = 0;
  for (const auto& line : lines) width = std::max(width, text_width(line));
  const int box_w = std::min(width + 4, canvas.width());
  const int box_h = std::min(static_cast<int>(lines.size()) + 2, canvas.height());
  const Rect box{(canvas.width() - box_w) / 2, (canvas.height() - box_h) / 2, box_w, box_h};
  canvas.fill(box, U' ', Style{});
  canvas.box(box, detail::title_style);
  const Rect inner{box.x + 2, box.y + 1, box.width - 4, box.height - 2};
  for (int i = 0; i < inner.height && i < static_cast<int>(lines.size()); ++i) {
    canvas.text(inner, inner.x, inner.y + i, lines[static_cast<std::size_t>(i)],
                i == 0 ? detail::title_style : Style{});
  }
}

}  // namespace

Layout layout_for(const ViewModel& model, int width, int height) {
  return compute_layout(width, height, static_cast<int>(model.gpus().size()),
                        static_cast<int>(model.rows().size()), !model.compact_only);
}

void render(const ViewModel& model, Canvas& canvas) {
  canvas.clear();
  const Layout layout = layout_for(model, canvas.width(), canvas.height());
  if (layout.mode == LayoutMode::Minimal) {
    canvas.text(canvas.bounds(), 0, 0, layout.message, error_style);
    return;
  }
  render_header(model, layout, canvas);
  for (std::size_t i = 0; i < layout.gpus.size() && i < model.gpus().size(); ++i) {
    detail::render_gpu(model.gpus()[i], layout.gpus[i], canvas);
  }
  Rect table = layout.processes;
  // Sampled peaks are said first, whatever is selected: the table's last line while a row
  // still fits above it.
  std::size_t other_polling = 0;
  if (const ProcessRow* row = polling_row(model, other_polling); row && table.height >= 3) {
    table.height -= render_polling(*row, other_polling, table, canvas);
  }
  // The selected process's breakdown takes the table's last line while a row still fits above.
  if (const ProcessRow* row = selected_with_categories(model); row && table.height >= 3) {
    render_categories(*row, table.row(table.height - 1), canvas);
    table.height -= 1;
  }
  if (const ProcessRow* row = selected_with_parts(model); row && table.height >= 3) {
    render_parts(*row, table.row(table.height - 1), canvas);
    table.height -= 1;
  }
  render_table(model, table, canvas);
  render_footer(model, layout.footer, canvas);
  if (model.help_visible) render_help(canvas);
}

}  // namespace vramscope::view
