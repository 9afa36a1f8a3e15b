// src/view/layout.cpp -- pure geometry of `vramscope top`: terminal size + counts -> rectangles
#include "vramscope/view/layout.hpp"

#include <algorithm>
#include <string>

namespace vramscope::view {

bool Rect::intersects(const Rect& other) const {
  if (empty() || other.empty()) return false;
  return x < other.right() && other.x < right() && y < other.bottom() && other.y < bottom();
}

bool Rect::contains(const Rect& inner) const {
  if (inner.empty()) return true;
  return inner.x >= x && inner.y >= y && inner.right() <= right() && inner.bottom() <= bottom();
}

Rect Rect::row(int dy) const {
  if (dy < 0 || dy >= height) return {};
  return {x, y + dy, width, 1};
}

namespace {

/// Full panels narrower than this squeeze the graph and legend into unreadable stubs.
constexpr int full_min_width = 60;
/// Width per column when panels are put side by side.
constexpr int full_column_width = 70;
constexpr int compact_column_width = 60;
constexpr int max_columns = 4;
constexpr int min_graph_rows = 2;
constexpr int max_graph_rows = 8;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// Where the grid of GPU panels sits and how each panel is cut.
struct Grid {
  int columns = 1;
  int panel_height = 1;
  int visible = 0;
};

GpuPanelLayout full_panel(Rect panel) {
  GpuPanelLayout p;
  p.panel = panel;
  p.boxed = true;
  const int summary_width = std::min(28, panel.width / 2);
  p.summary = {panel.right() - 2 - summary_width, panel.y, summary_width, 1};
  p.title = {panel.x + 2, panel.y, p.summary.x - 1 - (panel.x + 2), 1};
  p.legend = {panel.x + 1, panel.y + 1, panel.width - 2, 1};
  p.bar = {panel.x + 1, panel.y + 2, panel.width - 2, 1};
  p.graph = {panel.x + 1, panel.y + 3, panel.width - 2, panel.height - 4};
  return p;
}

GpuPanelLayout compact_panel(Rect panel, bool last_column) {
  GpuPanelLayout p;
  p.panel = panel;
  // A one-cell gutter keeps neighbouring columns apart.
  const int usable = panel.width - (last_column ? 0 : 1);
  const int title_width = std::clamp(usable / 5, 6, 16);
  // "1023M/1023M 100%" is the widest summary.
  const int summary_width = 16;
  p.title = {panel.x, panel.y, title_width, 1};
  p.summary = {panel.x + usable - summary_width, panel.y, summary_width, 1};
  p.bar = {p.title.right() + 1, panel.y, p.summary.x - 1 - (p.title.right() + 1), 1};
  if (panel.height >= 2) p.legend = {panel.x + 2, panel.y + 1, usable - 2, 1};
  return p;
}

void place_panels(Layout& layout, const Grid& grid, int top) {
  const int column_width = layout.width / grid.columns;
  for (int i = 0; i < grid.visible; ++i) {
    const int column = i % grid.columns;
    const int row = i / grid.columns;
    const bool last_column = column == grid.columns - 1;
    const int x = column * column_width;
    const int w = last_column ? layout.width - x : column_width;
    const Rect panel{x, top + row * grid.panel_height, w, grid.panel_height};
    layout.gpus.push_back(layout.mode == LayoutMode::Full ? full_panel(panel)
                                                          : compact_panel(panel, last_column));
  }
}

}  // namespace

Layout compute_layout(int width, int height, int gpu_count, int process_count, bool allow_full) {
  Layout layout;
  layout.width = std::max(width, 0);
  layout.height = std::max(height, 0);
  gpu_count = std::max(gpu_count, 0);
  process_count = std::max(process_count, 0);
  if (width < min_width_cells || height < min_height_cells) {
    layout.mode = LayoutMode::Minimal;
    layout.message = "terminal too small (need " + std::to_string(min_width_cells) + "x" +
                     std::to_string(min_height_cells) + ")";
    if (static_cast<int>(layout.message.size()) > layout.width) {
      // The shortest form still says what is wrong on a very narrow terminal.
      layout.message = "too small";
    }
    layout.message.resize(std::min<std::size_t>(layout.message.size(), layout.width));
    return layout;
  }
  layout.header = {0, 0, width, 1};
  layout.footer = {0, height - 1, width, 1};
  const int top = 1;
  const int body_height = height - 2;
  // The table keeps a few rows so that the processes, the point of the view, never vanish
  // while GPUs are merely given more room.
  const int table_min = 1 + std::clamp(process_count, 1, 3);
  const int full_table_min = 1 + std::clamp(process_count, 1, 5);

  Grid grid;
  bool placed = false;
  if (gpu_count == 0) {
    layout.mode = LayoutMode::Full;
    grid.visible = 0;
    grid.panel_height = 0;
    placed = true;
  }
  if (!placed && allow_full && width >= full_min_width) {
    // The column count that gives the tallest graphs wins; ties go to fewer, wider panels.
    const int columns_max = std::clamp(width / full_column_width, 1, max_columns);
    int best_graph_rows = min_graph_rows - 1;
    for (int columns = 1; columns <= std::min(columns_max, gpu_count); ++columns) {
      const int rows = ceil_div(gpu_count, columns);
      const int graph_rows = std::min(max_graph_rows, (body_height - full_table_min) / rows - 4);
      if (graph_rows > best_graph_rows) {
        best_graph_rows = graph_rows;
        layout.mode = LayoutMode::Full;
        grid = {columns, 4 + graph_rows, gpu_count};
        placed = true;
      }
    }
  }
  const int compact_columns_max = std::clamp(width / compact_column_width, 1, max_columns);
  for (int lines = 2; lines >= 1 && !placed; --lines) {
    for (int columns = 1; columns <= std::min(compact_columns_max, gpu_count) && !placed;
         ++columns) {
      if (ceil_div(gpu_count, columns) * lines + table_min <= body_height) {
        layout.mode = LayoutMode::Compact;
        grid = {columns, lines, gpu_count};
        placed = true;
      }
    }
  }
  if (!placed) {
    // Not even one line per GPU plus a table: GPUs first, as many as fit, the table gets
    // whatever is left (often nothing) and the header reports the hidden count.
    layout.mode = LayoutMode::Compact;
    const int columns = std::min(compact_columns_max, gpu_count);
    grid = {columns, 1, std::min(gpu_count, body_height * columns)};
  }
  layout.hidden_gpu_count = gpu_count - grid.visible;
  place_panels(layout, grid, top);

  const int grid_rows = grid.visible == 0 ? 0 : ceil_div(grid.visible, grid.columns);
  const int table_top = top + grid_rows * grid.panel_height;
  const int table_height = top + body_height - table_top;
  if (table_height >= 2) layout.processes = {0, table_top, width, table_height};
  return layout;
}

std::vector<Rect> top_level_rects(const Layout& layout) {
  std::vector<Rect> rects{layout.header, layout.processes, layout.footer};
  for (const auto& gpu : layout.gpus) rects.push_back(gpu.panel);
  return rects;
}

}  // namespace vramscope::view
