// src/view/include/vramscope/view/layout.hpp -- pure geometry of `vramscope top`: terminal size + counts -> rectangles
//
// Nothing here knows about samples, colours or ncurses: the same sizes always give the same
// rectangles, so the invariants (no overlap, nothing off screen, every GPU visible when the size
// allows) are tested over a sweep of sizes without a terminal.
#pragma once

#include <string>
#include <vector>

namespace vramscope::view {

/// A rectangle of terminal cells; x grows rightwards, y downwards, (0,0) is the top-left cell.
struct Rect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;

  /// Does the rectangle cover no cell at all?
  bool empty() const { return width <= 0 || height <= 0; }
  /// One past the last column / row.
  int right() const { return x + width; }
  int bottom() const { return y + height; }
  /// Do both rectangles share at least one cell? Empty rectangles intersect nothing.
  bool intersects(const Rect& other) const;
  /// Is every cell of `inner` inside this rectangle? An empty `inner` is contained anywhere.
  bool contains(const Rect& inner) const;
  /// The row `dy` of this rectangle as a one-line rectangle (empty when out of range).
  Rect row(int dy) const;
  bool operator==(const Rect&) const = default;
};

/// How much room each GPU gets.
enum class LayoutMode {
  /// Boxed panel per GPU: title, legend with numbers, memory bar and a history graph.
  Full,
  /// One or two lines per GPU: label, memory bar, numbers (and the legend on a second line).
  Compact,
  /// The terminal is too small for anything useful: one line that says so.
  Minimal,
};

/// Where one GPU is drawn. Every part lies inside `panel`; parts never overlap each other.
struct GpuPanelLayout {
  /// Everything this GPU owns (including the box border in Full mode).
  Rect panel;
  /// GPU index and name (on the top border in Full mode).
  Rect title;
  /// Used / total numbers (Compact: right of the bar; Full: right part of the title line).
  Rect summary;
  /// The memory bar split by owner.
  Rect bar;
  /// Legend of the bar with one number per part; empty in one-line Compact mode.
  Rect legend;
  /// History graph of used and torch-allocated bytes; empty in Compact mode.
  Rect graph;
  /// Is the panel drawn with a box border?
  bool boxed = false;
};

/// The whole screen.
struct Layout {
  LayoutMode mode = LayoutMode::Minimal;
  /// Terminal size the layout was made for.
  int width = 0;
  int height = 0;
  /// One line: host, driver, time (or the replay banner).
  Rect header;
  /// One panel per visible GPU, in GPU order (the first `gpus.size()` GPUs).
  std::vector<GpuPanelLayout> gpus;
  /// GPUs that did not fit; non-zero only when even one line per GPU does not fit.
  int hidden_gpu_count = 0;
  /// Process table including its column-header line; empty when there is no room.
  Rect processes;
  /// One line of key hints.
  Rect footer;
  /// Minimal mode: the one line shown instead of the view.
  std::string message;
};

/// Smallest terminal the view is drawn in; below it Layout::message explains what is needed.
inline constexpr int min_width_cells = 40;
inline constexpr int min_height_cells = 10;

/// Computes the layout for a `width` x `height` terminal showing `gpu_count` GPUs and
/// `process_count` process rows. Never fails: negative or tiny sizes give Minimal mode.
/// `allow_full` false keeps to Compact (a single frame has no history worth a graph).
Layout compute_layout(int width, int height, int gpu_count, int process_count,
                      bool allow_full = true);

/// Every top-level rectangle of `layout` (header, panels, processes, footer), for overlap checks.
std::vector<Rect> top_level_rects(const Layout& layout);

}  // namespace vramscope::view
