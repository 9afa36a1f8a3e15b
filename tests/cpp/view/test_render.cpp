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
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fixtures.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/units.hpp"
#include "vramscope/view/render.hpp"

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
  model.notice =
      "vramscope: agent segment agent-42.seg (pid 42) has format v9; this vramscope reads v2";
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

TEST_F(Render, ReplayStateSurvivesAnEightyColumnTerminal) {
  ViewModel model = one_gpu_with_history();
  model.replay = ReplayStatus{
      "h200-training.vsrec", "gpu-node-17", fixtures::base_ns, 812, 1500, 2.0, true, ""};
  model.paused = true;
  const std::string text = frame(model, 80, 24);
  const std::string header = text.substr(0, text.find('\n'));
  EXPECT_NE(header.find("REPLAY │ sample 812/1500 │ 2x │ END │ PAUSED"), std::string::npos)
      << header;
  // The state and the clock stay; where the recording comes from shrinks to what fits.
  EXPECT_NE(header.find(local_time_text(model.timestamp_ns())), std::string::npos) << header;
  const std::string medium = frame(model, 100, 24);
  EXPECT_NE(medium.substr(0, medium.find('\n')).find("PAUSED │ h200-training.vsrec  "),
            std::string::npos)
      << medium;
  const std::string wide = frame(model, 160, 24);
  EXPECT_NE(wide.find("h200-training.vsrec, recorded on gpu-node-17 at "), std::string::npos)
      << wide;
}

TEST_F(Render, NoKeyHintsInAFramePrintedAsText) {
  ViewModel model = one_gpu_with_history();
  EXPECT_NE(frame(model, 100, 20).find("q quit"), std::string::npos);
  model.key_hints = false;
  EXPECT_EQ(frame(model, 100, 20).find("quit"), std::string::npos);
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
  SystemSample sample = fixtures::eight_gpus();
  // The selected rank has a step breakdown, so the categories line is drawn too.
  sample.steps.push_back(fixtures::step(10056, "GPU-00000007", 3, CategoryBytes{1, 2, 3, 4, 5, 6}));
  // Two ranks poll, one with a reason longer than any line, the polling lines are drawn too.
  sample.allocators[0].polling_only = true;
  sample.allocators[0].polling_reason = std::string(300, 'w') + " " + std::string(300, 'v');
  sample.allocators[7].polling_only = true;
  ViewModel model;
  model.ingest(sample);
  model.select_first();
  model.help_visible = true;
  for (int w = 1; w <= 130; w += 9) {
    for (int h = 1; h <= 45; h += 4) {
      Canvas canvas(w, h, (w + h) % 2 == 0);
      render(model, canvas);
      EXPECT_EQ(canvas.to_text().size() >= static_cast<std::size_t>(h), true);
    }
  }
}

/// Lines of a frame, without their newlines.
std::vector<std::string> lines_of(const std::string& frame) {
  std::vector<std::string> out;
  std::stringstream in(frame);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// one_gpu_with_history() whose trainer (pid 4242, the first row) finished step 812 with a
/// breakdown: params 1.5G, grads 1.5G, optim 3.0G, activ 2.5G, temp 210M, other 12.0M; and
/// whose agent has `parts` as its settled pairing, when given.
ViewModel trainer_with_categories(const std::optional<DriverBreakdown>& parts = std::nullopt) {
  ViewModel model;
  model.interval_ns = 250'000'000;
  for (int t = 0; t < 40; ++t) {
    SystemSample sample = fixtures::one_gpu(t);
    if (t == 30) {
      const uint64_t mib = fixtures::mib;
      sample.steps.push_back(fixtures::step(
          4242, "GPU-00000000", 812,
          CategoryBytes{1536 * mib, 1536 * mib, 3072 * mib, 2560 * mib, 210 * mib, 12 * mib}));
    }
    sample.allocators[0].breakdown = parts;
    model.ingest(sample);
  }
  return model;
}

constexpr std::string_view categories_line =
    "pid 4242 GPU 0 step 812 peak 8.7G: params 1.5G  grads 1.5G  optim 3.0G  activ 2.5G  "
    "temp 210M  other 12.0M";

TEST_F(Render, StepAndRankTooWideForTheirColumnsAreMarkedNotCut) {
  SystemSample sample = fixtures::one_gpu();
  sample.allocators[0].step = 12345678;
  sample.allocators[0].rank = 1234567;
  ViewModel model;
  model.ingest(sample);
  const std::string text = frame(model, 160, 30);
  EXPECT_EQ(text.find(" 2345678 "), std::string::npos) << "STEP lost its leading digit:\n" << text;
  EXPECT_NE(text.find("…345678"), std::string::npos) << text;
  EXPECT_NE(text.find("…567"), std::string::npos) << "RANK is marked too:\n" << text;
}

TEST_F(Render, SelectedProcessShowsItsStepCategoriesAboveTheFooter) {
  ViewModel model = trainer_with_categories();
  model.select_first();
  ASSERT_EQ(model.rows()[*model.selected_index()].pid, 4242U);
  const auto lines = lines_of(frame(model, 120, 30));
  ASSERT_EQ(lines.size(), 30U);
  EXPECT_EQ(lines[28], categories_line);
  EXPECT_NE(lines[29].find("quit"), std::string::npos) << "the footer stays last";
}

TEST_F(Render, NoCategoriesLineForARowWithoutOneOrWithoutSelection) {
  ViewModel with = trainer_with_categories();
  ViewModel without = one_gpu_with_history();
  // Nothing selected: the same frame as without any breakdown.
  EXPECT_EQ(frame(with, 120, 30), frame(without, 120, 30));
  // The other process (no agent) selected: still the same frame, no empty line either.
  with.select_last();
  without.select_last();
  ASSERT_EQ(with.rows()[*with.selected_index()].pid, 777U);
  EXPECT_EQ(frame(with, 120, 30), frame(without, 120, 30));
  with.select_first();
  EXPECT_NE(frame(with, 120, 30), frame(without, 120, 30));
}

TEST_F(Render, CategoriesLineDropsWholeCategoriesOnANarrowTerminal) {
  ViewModel model = trainer_with_categories();
  model.select_first();
  const auto lines = lines_of(frame(model, 60, 30));
  ASSERT_EQ(lines.size(), 30U);
  EXPECT_EQ(lines[28], "pid 4242 GPU 0 step 812 peak 8.7G: params 1.5G  grads 1.5G");
  for (const auto& line : lines) EXPECT_LE(text_width(line), 60) << line;
  // At the narrowest width the prefix alone is clipped at the edge, never wrapped.
  const auto narrow = lines_of(frame(model, 40, 30));
  EXPECT_EQ(narrow[28], "pid 4242 GPU 0 step 812 peak 8.7G:");
}

TEST_F(Render, SelectedProcessNamesItsNonTorchBytesAboveItsCategories) {
  DriverBreakdown parts;
  parts.context_bytes = 614 * fixtures::mib;
  parts.other_bytes = 64 * fixtures::mib;
  parts.private_pool_bytes = 34 * fixtures::mib;
  parts.nccl_version = 22809;
  ViewModel model = trainer_with_categories(parts);
  model.select_first();
  const auto lines = lines_of(frame(model, 120, 30));
  ASSERT_EQ(lines.size(), 30U);
  EXPECT_EQ(lines[27],
            "pid 4242 GPU 0 non-PyTorch: context 614M  other 64.0M  NCCL in other  private pools "
            "34.0M");
  EXPECT_EQ(lines[28], categories_line);
  EXPECT_NE(lines[29].find("quit"), std::string::npos) << "the footer stays last";
  // Nothing selected: no detail line.
  ViewModel unselected = model;
  unselected.select_last();
  EXPECT_EQ(frame(unselected, 120, 30).find("non-PyTorch:"), std::string::npos);
}

TEST_F(Render, CategoriesLineTakesTheTablesLastRow) {
  SystemSample sample = fixtures::eight_gpus();
  ViewModel without;
  without.ingest(sample);
  without.select_first();
  const uint32_t pid = without.rows()[0].pid;
  sample.steps.push_back(fixtures::step(pid, "GPU-00000007", 3, CategoryBytes{1, 2, 3, 4, 5, 6}));
  ViewModel with;
  with.ingest(sample);
  with.select_first();
  const auto count_rows = [](const std::string& text) {
    int n = 0;
    for (const auto& line : lines_of(text)) {
      if (line.find("python -m torch") != std::string::npos) ++n;
    }
    return n;
  };
  const std::string before = frame(without, 80, 24);
  const std::string after = frame(with, 80, 24);
  EXPECT_EQ(count_rows(after), count_rows(before) - 1) << before << after;
  const auto lines = lines_of(after);
  EXPECT_EQ(lines[22], "pid " + std::to_string(pid) +
                           " GPU 7 step 3 peak 21B: params 1B  grads 2B  optim 3B  activ 4B");
}

TEST_F(Render, PollingProcessMarksItsPeakAndSaysWhyWithTheFix) {
  ViewModel model;
  model.interval_ns = 250'000'000;
  for (int t = 0; t < 40; ++t) model.ingest(fixtures::one_gpu_polling(t));
  expect_golden("polling_100x30", frame(model, 100, 30));
}

TEST_F(Render, PollingLineNamesTheSelectedPollingProcessAndCountsTheOthers) {
  SystemSample sample = fixtures::eight_gpus();
  // Ranks 2 and 5 poll (a torch the wheel has no library for, on ranks launched alike).
  for (const std::size_t rank : {std::size_t{2}, std::size_t{5}}) {
    sample.allocators[rank].polling_only = true;
    sample.allocators[rank].polling_reason = "reason of rank " + std::to_string(rank);
  }
  const uint32_t rank2 = sample.allocators[2].pid;
  const uint32_t rank5 = sample.allocators[5].pid;
  ViewModel model;
  model.set_sort_key(SortKey::Pid);
  model.ingest(sample);
  std::vector<std::string> lines = lines_of(frame(model, 160, 60));
  ASSERT_EQ(lines.size(), 60U);
  EXPECT_EQ(lines[58], "pid " + std::to_string(rank2) +
                           " (+1 more): polling mode, peaks sampled (≥): reason of rank 2");
  // Only the polling rows' peaks are marked.
  for (const auto& line : lines) {
    const bool polls = line.find(" " + std::to_string(rank2) + " ") == 1 ||
                       line.find(" " + std::to_string(rank5) + " ") == 1;
    if (line.find("python -m torch") == std::string::npos) continue;
    EXPECT_EQ(line.find("≥") != std::string::npos, polls) << line;
  }
  // The selected row, when it polls, is the one explained; one that does not changes nothing.
  model.select_first();
  while (model.rows()[*model.selected_index()].pid != rank5) model.move_selection(1);
  lines = lines_of(frame(model, 160, 60));
  EXPECT_EQ(lines[58], "pid " + std::to_string(rank5) +
                           " (+1 more): polling mode, peaks sampled (≥): reason of rank 5");
  model.select_first();
  ASSERT_NE(model.rows()[*model.selected_index()].pid, rank2);
  EXPECT_EQ(lines_of(frame(model, 160, 60))[58].rfind("pid " + std::to_string(rank2), 0), 0U);
}

TEST_F(Render, PollingMarksInAsciiAndWithoutAReason) {
  SystemSample sample = fixtures::one_gpu_polling();
  sample.allocators[0].polling_reason.clear();  // an older vramscope that did not say why
  ViewModel model;
  model.ingest(sample);
  const std::string text = frame(model, 100, 30, /*unicode=*/false);
  EXPECT_NE(text.find(" >10.0G "), std::string::npos) << text;
  EXPECT_NE(text.find("\npid 4242: polling mode, peaks sampled (>)\n"), std::string::npos) << text;
}

TEST_F(Render, ControlCharactersInAPollingReasonNeverReachTheFrame) {
  SystemSample sample = fixtures::one_gpu_polling();
  sample.allocators[0].polling_reason =
      "evil\x1b]0;pwned\x07\nnext\x9b"
      "2J fix";
  ViewModel model;
  model.ingest(sample);
  const std::string text = frame(model, 100, 30);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_NE(text.find("peaks sampled (≥): evil"), std::string::npos) << text;
}

TEST_F(Render, NoPollingLineWithoutAPollingRow) {
  const std::string text = frame(one_gpu_with_history(), 100, 30);
  EXPECT_EQ(text.find("polling"), std::string::npos);
  EXPECT_EQ(text.find("≥"), std::string::npos);
}

TEST(CompactBytes, FitsFiveCellsAndRoundsSensibly) {
  EXPECT_EQ(format_bytes_compact(0), "0B");
  EXPECT_EQ(format_bytes_compact(999), "999B");
  EXPECT_EQ(format_bytes_compact(1000), "1.0K");
  EXPECT_EQ(format_bytes_compact(12ULL * fixtures::gib + 300 * fixtures::mib), "12.3G");
  EXPECT_EQ(format_bytes_compact(140 * fixtures::gib), "140G");
  EXPECT_EQ(format_bytes_compact(999 * fixtures::mib), "999M");
  EXPECT_EQ(format_bytes_compact(1023 * fixtures::mib), "1.0G");
  EXPECT_EQ(format_bytes_compact(1ULL << 62U), "4096P");
  for (uint64_t b = 1; b < (1ULL << 60U); b = b * 3 + 1) {
    EXPECT_LE(format_bytes_compact(b).size(), 5U) << b;
  }
}

TEST(CompactDuration, PicksTheLargestUsefulUnit) {
  EXPECT_EQ(format_duration_compact(250'000'000), "250ms");
  EXPECT_EQ(format_duration_compact(12'500'000'000), "12s");
  EXPECT_EQ(format_duration_compact(185'000'000'000), "3m05s");
  EXPECT_EQ(format_duration_compact(7'260'000'000'000), "2h01m");
  EXPECT_EQ(format_duration_compact(-5), "0ms");
}

}  // namespace
}  // namespace vramscope::view
