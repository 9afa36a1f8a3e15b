// tests/cpp/view/test_render.cpp -- whole frames of `top` compared with golden text files
//
// Goldens live in tests/data/golden/top_*.txt. After an intended change to the view, regenerate
// them with
//     VRAMSCOPE_UPDATE_GOLDENS=1 ctest --test-dir build/dev -R Render
// and review the diff like code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fixtures.hpp"
#include "view/render.hpp"

namespace vramscope::view {
namespace {

std::filesystem::path golden_path(const std::string& name) {
  const char* data = std::getenv("VRAMSCOPE_TEST_DATA");
  return std::filesystem::path(data ? data : VRAMSCOPE_SOURCE_TEST_DATA) / "golden" /
         ("top_" + name + ".txt");
}

/// Compares `frame` with the golden file `name`, or rewrites the file when asked to.
void expect_golden(const std::string& name, const std::string& frame) {
  const auto path = golden_path(name);
  if (std::getenv("VRAMSCOPE_UPDATE_GOLDENS") != nullptr) {
    std::ofstream(path, std::ios::binary) << frame;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "missing golden " << path << " (run with VRAMSCOPE_UPDATE_GOLDENS=1)";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(frame, expected.str()) << "frame differs from " << path;
}

class Render : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Frames show local times: pin the zone so that goldens do not depend on the machine.
    setenv("TZ", "UTC", 1);
    tzset();
  }
  static std::string frame(const ViewModel& model, int width, int height, bool unicode = true) {
    Canvas canvas(width, height, unicode);
    render(model, canvas);
    return canvas.to_text();
  }
  static ViewModel one_gpu_with_history() {
    ViewModel model;
    model.interval_ns = 250'000'000;
    for (int t = 0; t < 40; ++t) model.ingest(fixtures::one_gpu(t));
    return model;
  }
};

TEST_F(Render, OneGpuFullPanel) {
  expect_golden("one_gpu_100x30", frame(one_gpu_with_history(), 100, 30));
}

TEST_F(Render, OneGpuFullPanelAscii) {
  expect_golden("one_gpu_100x30_ascii", frame(one_gpu_with_history(), 100, 30, false));
}

TEST_F(Render, EightGpusCompactOnAStandardTerminal) {
  ViewModel model;
  model.interval_ns = 250'000'000;
  model.ingest(fixtures::eight_gpus());
  model.move_selection(2);
  expect_golden("eight_gpus_80x24", frame(model, 80, 24));
}

TEST_F(Render, EightGpusWideTerminal) {
  ViewModel model;
  model.interval_ns = 10'000'000;
  model.ingest(fixtures::eight_gpus());
  expect_golden("eight_gpus_200x50", frame(model, 200, 50));
}

TEST_F(Render, HelpOverlay) {
  ViewModel model = one_gpu_with_history();
  model.help_visible = true;
  expect_golden("help_80x24", frame(model, 80, 24));
}

TEST_F(Render, NoticeReplacesTheKeyHintsInTheFooter) {
  ViewModel model = one_gpu_with_history();
  model.notice = "vramscope: agent segment agent-42.seg (pid 42) has format v9; this vramscope reads v2";
  const std::string text = frame(model, 100, 20);
  const std::string footer = text.substr(text.rfind('\n', text.size() - 2) + 1);
  EXPECT_NE(footer.find("has format v9"), std::string::npos) << text;
  EXPECT_EQ(footer.find("quit"), std::string::npos) << text;
  model.notice.clear();
  const std::string plain = frame(model, 100, 20);
  EXPECT_NE(plain.substr(plain.rfind('\n', plain.size() - 2) + 1).find("quit"), std::string::npos);
}

TEST_F(Render, FilterAndSortAndPauseShowInHeaderAndFooter) {
  ViewModel model = one_gpu_with_history();
  model.set_sort_key(SortKey::Command);
  model.set_filter("ollama");
  model.paused = true;
  expect_golden("filtered_100x20", frame(model, 100, 20));
  model.filter_editing = true;
  const std::string editing = frame(model, 100, 20);
  EXPECT_NE(editing.find("/ollama█   Enter keep, Esc clear"), std::string::npos) << editing;
}

TEST_F(Render, ReplayBanner) {
  ViewModel model = one_gpu_with_history();
  model.replay = ReplayStatus{"run.vrec", "node-a", fixtures::base_ns, 40, 100, 4.0, false, ""};
  model.paused = true;
  expect_golden("replay_100x24", frame(model, 100, 24));
}

TEST_F(Render, TooSmallTerminalSaysSo) {
  EXPECT_EQ(frame(one_gpu_with_history(), 39, 9),
            "terminal too small (need 40x10)\n" + std::string(8, '\n'));
}

TEST_F(Render, LostGpuIsExplainedAndOthersStillDrawn) {
  SystemSample sample = fixtures::eight_gpus();
  sample.devices[3].lost = true;
  sample.devices[3].total_bytes.reset();
  sample.devices[3].used_bytes.reset();
  ViewModel model;
  model.ingest(sample);
  const std::string text = frame(model, 100, 40);
  EXPECT_NE(text.find("GPU lost"), std::string::npos) << text;
  EXPECT_NE(text.find("7 H200"), std::string::npos) << text;
}

TEST_F(Render, EveryFrameOfASizeSweepStaysInsideTheCanvas) {
  // render() must never write outside the grid nor crash, whatever the size and state.
  ViewModel model;
  model.ingest(fixtures::eight_gpus());
  model.help_visible = true;
  for (int w = 1; w <= 130; w += 9) {
    for (int h = 1; h <= 45; h += 4) {
      Canvas canvas(w, h, (w + h) % 2 == 0);
      render(model, canvas);
      EXPECT_EQ(canvas.to_text().size() >= static_cast<std::size_t>(h), true);
    }
  }
}

TEST(CompactBytes, FitsFiveCellsAndRoundsSensibly) {
  EXPECT_EQ(compact_bytes(0), "0B");
  EXPECT_EQ(compact_bytes(999), "999B");
  EXPECT_EQ(compact_bytes(1000), "1.0K");
  EXPECT_EQ(compact_bytes(12ULL * fixtures::gib + 300 * fixtures::mib), "12.3G");
  EXPECT_EQ(compact_bytes(140 * fixtures::gib), "140G");
  EXPECT_EQ(compact_bytes(999 * fixtures::mib), "999M");
  EXPECT_EQ(compact_bytes(1023 * fixtures::mib), "1.0G");
  EXPECT_EQ(compact_bytes(1ULL << 62U), "4096P");
  for (uint64_t b = 1; b < (1ULL << 60U); b = b * 3 + 1) {
    EXPECT_LE(compact_bytes(b).size(), 5U) << b;
  }
}

TEST(CompactDuration, PicksTheLargestUsefulUnit) {
  EXPECT_EQ(compact_duration(250'000'000), "250ms");
  EXPECT_EQ(compact_duration(12'500'000'000), "12s");
  EXPECT_EQ(compact_duration(185'000'000'000), "3m05s");
  EXPECT_EQ(compact_duration(7'260'000'000'000), "2h01m");
  EXPECT_EQ(compact_duration(-5), "0ms");
}

}  // namespace
}  // namespace vramscope::view
