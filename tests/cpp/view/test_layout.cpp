// tests/cpp/view/test_layout.cpp -- layout invariants over a sweep of terminal sizes and counts
#include <gtest/gtest.h>

#include <string>

#include "vramscope/view/layout.hpp"

namespace vramscope::view {
namespace {

std::string describe(int w, int h, int gpus, int procs) {
  return std::to_string(w) + "x" + std::to_string(h) + " gpus=" + std::to_string(gpus) +
         " procs=" + std::to_string(procs);
}

/// Checks every invariant of one layout with fatal assertions (the caller adds the trace).
void check_layout_invariants(int w, int h, int gpus, int procs) {
  const Layout layout = compute_layout(w, h, gpus, procs);
  const Rect screen{0, 0, w, h};
  if (w < min_width_cells || h < min_height_cells) {
    ASSERT_EQ(layout.mode, LayoutMode::Minimal);
    if (w >= 9) {
      ASSERT_FALSE(layout.message.empty());
    }
    ASSERT_LE(static_cast<int>(layout.message.size()), w);
    ASSERT_TRUE(layout.gpus.empty());
    return;
  }
  ASSERT_NE(layout.mode, LayoutMode::Minimal);
  const auto rects = top_level_rects(layout);
  for (std::size_t i = 0; i < rects.size(); ++i) {
    ASSERT_TRUE(screen.contains(rects[i])) << "rect " << i << " off screen";
    for (std::size_t j = i + 1; j < rects.size(); ++j) {
      ASSERT_FALSE(rects[i].intersects(rects[j])) << "rects " << i << " and " << j << " overlap";
    }
  }
  ASSERT_EQ(layout.header.height, 1);
  ASSERT_EQ(layout.footer.height, 1);
  ASSERT_EQ(static_cast<int>(layout.gpus.size()) + layout.hidden_gpu_count, gpus);
  for (const auto& panel : layout.gpus) {
    ASSERT_FALSE(panel.panel.empty());
    ASSERT_FALSE(panel.title.empty());
    ASSERT_GE(panel.bar.width, 5) << "bar too narrow to read";
    const Rect parts[] = {panel.title, panel.summary, panel.bar, panel.legend, panel.graph};
    for (std::size_t i = 0; i < std::size(parts); ++i) {
      ASSERT_TRUE(panel.panel.contains(parts[i])) << "part " << i << " outside its panel";
      for (std::size_t j = i + 1; j < std::size(parts); ++j) {
        ASSERT_FALSE(parts[i].intersects(parts[j])) << "parts " << i << " and " << j;
      }
    }
    if (layout.mode == LayoutMode::Full) {
      ASSERT_TRUE(panel.boxed);
      ASSERT_GE(panel.graph.height, 2);
    } else {
      ASSERT_TRUE(panel.graph.empty());
    }
  }
  // Panels are in GPU order: reading order, row by row.
  for (std::size_t i = 1; i < layout.gpus.size(); ++i) {
    const Rect& a = layout.gpus[i - 1].panel;
    const Rect& b = layout.gpus[i].panel;
    ASSERT_TRUE(b.y > a.y || (b.y == a.y && b.x > a.x));
  }
  // A table with only its header line would be an empty pane.
  ASSERT_TRUE(layout.processes.empty() || layout.processes.height >= 2);
  // Every GPU is visible whenever one line per GPU fits in one column.
  if (h - 2 >= gpus) {
    ASSERT_EQ(layout.hidden_gpu_count, 0);
  }
  // GPUs are hidden only once the table has been given up.
  if (layout.hidden_gpu_count > 0) {
    ASSERT_TRUE(layout.processes.empty());
  }
}

/// Checks one layout; the size is named only when something failed (the sweep is large).
void check_layout(int w, int h, int gpus, int procs) {
  check_layout_invariants(w, h, gpus, procs);
  if (testing::Test::HasFatalFailure()) ADD_FAILURE() << "at " << describe(w, h, gpus, procs);
}

TEST(Layout, InvariantsHoldOverASweepOfSizes) {
  const int process_counts[] = {0, 1, 3, 10, 64, 200};
  for (int w = 20; w <= 300; w += 7) {
    for (int h = 5; h <= 100; h += 3) {
      for (int gpus = 0; gpus <= 16; ++gpus) {
        for (const int procs : process_counts) {
          check_layout(w, h, gpus, procs);
          if (testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(Layout, ExactMinimumSizesAndBelow) {
  for (const int gpus : {0, 1, 8, 16}) {
    check_layout(min_width_cells, min_height_cells, gpus, 64);
    check_layout(min_width_cells - 1, min_height_cells, gpus, 64);
    check_layout(min_width_cells, min_height_cells - 1, gpus, 64);
  }
  check_layout(0, 0, 8, 64);
  check_layout(1, 1, 8, 64);
  const Layout negative = compute_layout(-5, -3, -1, -1);
  EXPECT_EQ(negative.mode, LayoutMode::Minimal);
  EXPECT_TRUE(negative.message.empty());  // no room for even one character
}

TEST(Layout, MinimalModeSaysWhatSizeIsNeeded) {
  EXPECT_EQ(compute_layout(39, 24, 1, 1).message, "terminal too small (need 40x10)");
  EXPECT_EQ(compute_layout(20, 24, 1, 1).message, "too small");
}

TEST(Layout, EightGpusFitAStandardTerminalWithSomeProcessRows) {
  const Layout layout = compute_layout(80, 24, 8, 64);
  EXPECT_EQ(layout.mode, LayoutMode::Compact);
  EXPECT_EQ(layout.gpus.size(), 8U);
  EXPECT_EQ(layout.hidden_gpu_count, 0);
  EXPECT_GE(layout.processes.height - 1, 3) << "a few process rows below the GPUs";
}

TEST(Layout, OneGpuOnAStandardTerminalGetsAFullPanelWithAGraph) {
  const Layout layout = compute_layout(80, 24, 1, 5);
  EXPECT_EQ(layout.mode, LayoutMode::Full);
  ASSERT_EQ(layout.gpus.size(), 1U);
  EXPECT_GE(layout.gpus[0].graph.height, 2);
  EXPECT_EQ(layout.gpus[0].graph.width, 78);
}

TEST(Layout, WideTerminalsPutPanelsSideBySide) {
  const Layout layout = compute_layout(240, 60, 8, 64);
  EXPECT_EQ(layout.mode, LayoutMode::Full);
  ASSERT_EQ(layout.gpus.size(), 8U);
  EXPECT_EQ(layout.gpus[0].panel.y, layout.gpus[1].panel.y);
}

TEST(Layout, SixteenGpusOnATinyTerminalHideSomeAndSaySo) {
  const Layout layout = compute_layout(40, 10, 16, 10);
  EXPECT_EQ(layout.mode, LayoutMode::Compact);
  EXPECT_EQ(layout.gpus.size(), 8U);
  EXPECT_EQ(layout.hidden_gpu_count, 8);
}

TEST(Layout, CompactOnlyNeverDrawsGraphs) {
  EXPECT_EQ(compute_layout(200, 100, 8, 64, false).mode, LayoutMode::Compact);
  EXPECT_EQ(compute_layout(200, 100, 8, 64, true).mode, LayoutMode::Full);
}

TEST(Layout, NoGpusGivesTheTableTheWholeBody) {
  const Layout layout = compute_layout(80, 24, 0, 3);
  EXPECT_TRUE(layout.gpus.empty());
  EXPECT_EQ(layout.processes, (Rect{0, 1, 80, 22}));
}

}  // namespace
}  // namespace vramscope::view
