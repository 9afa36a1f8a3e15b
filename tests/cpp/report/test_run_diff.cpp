// tests/cpp/report/test_run_diff.cpp -- matching runs, step-peak distributions, growth checks
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "build_limits.hpp"
#include "golden.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/report/run_diff.hpp"

namespace vramscope::report {
namespace {

using testing::make_allocator;
using testing::make_device;
using testing::make_process;
using testing::mib;

/// A run of GPU 0 with a trainer (`pid`, rank `rank`, driver peak `used_mib`) and Xorg; the
/// trainer ends `steps` steps whose allocated peaks are 1000 + i MiB (i = 1..steps), then
/// `last_step_mib` for one more step. The trainer's agent publishes `parts` as its settled
/// pairing when given; `polling`: its agent polls (cudaMallocAsync: peaks sampled).
RunProfile make_run(uint32_t pid, int32_t rank, uint64_t used_mib, int steps,
                    uint64_t last_step_mib, const std::string& name = "a.vsrec",
                    const std::optional<DriverBreakdown>& parts = std::nullopt,
                    bool polling = false) {
  RunProfile run;
  run.path = name;
  StepPeakCollector collector;
  SystemSample s;
  s.timestamp_ns = 1'700'000'000'000'000'000;
  DeviceSample gpu0 = make_device(0);
  gpu0.used_bytes = (used_mib + 900) * mib;
  gpu0.processes.push_back(make_process(pid, used_mib));
  gpu0.processes.push_back(make_process(5177, 900, true, "/usr/bin/Xorg :0"));
  s.devices.push_back(gpu0);
  AllocatorSample agent = make_allocator(pid, gpu0, used_mib / 2, used_mib * 3 / 4);
  agent.rank = rank;
  agent.breakdown = parts;
  agent.polling_only = polling;
  s.allocators.push_back(agent);
  for (int i = 1; i <= steps + 1; ++i) {
    StepRecord step;
    step.pid = pid;
    step.rank = rank;
    step.device_uuid = gpu0.uuid;
    step.step = static_cast<uint64_t>(i);
    step.end_ns = s.timestamp_ns;
    step.peak_allocated_bytes =
        (i <= steps ? 1000 + static_cast<uint64_t>(i) : last_step_mib) * mib;
    step.peak_requested_bytes = step.peak_allocated_bytes;
    if (i == steps + 1) step.category_bytes = CategoryBytes{last_step_mib * mib, 0, 0, 0, 0, 0};
    s.steps = {step};
    run.summary.add(s);
    collector.add(s);
    s.timestamp_ns += 100'000'000;
  }
  run.steps = collector.processes();
  return run;
}

const ProcessDiff& row_labelled(const RunDiff& diff, const std::string& label) {
  for (const ProcessDiff& p : diff.processes) {
    if (p.label == label) return p;
  }
  ADD_FAILURE() << "no row " << label;
  return diff.processes.front();
}

TEST(StepDistribution, NearestRankOfObservedValues) {
  std::vector<StepPoint> steps;
  for (uint64_t i = 100; i >= 1; --i) steps.push_back(StepPoint{i, 0, i * mib, 0});
  const std::optional<StepDistribution> d = allocated_distribution(steps);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->count, 100U);
  EXPECT_EQ(d->median_bytes, 50 * mib);
  EXPECT_EQ(d->p99_bytes, 99 * mib);
  EXPECT_EQ(d->max_bytes, 100 * mib);
  const std::optional<StepDistribution> one = allocated_distribution({StepPoint{1, 0, 7, 0}});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->median_bytes, 7U);
  EXPECT_EQ(one->p99_bytes, 7U);
  EXPECT_FALSE(allocated_distribution({}));
}

TEST(RunDiff, MatchesProcessesByRankAcrossPidsAndComputesDeltas) {
  const RunProfile a = make_run(4021, 0, 40000, 99, 2000);
  const RunProfile b = make_run(7777, 0, 42000, 99, 2200, "b.vsrec");
  const RunDiff diff = compare_runs(a, b);
  ASSERT_EQ(diff.devices.size(), 1U);
  EXPECT_EQ(diff.devices[0].peak_used_bytes.a, 40900 * mib);
  EXPECT_EQ(diff.devices[0].peak_used_bytes.delta(), static_cast<int64_t>(2000 * mib));
  ASSERT_EQ(diff.processes.size(), 2U);  // the trainer by rank, Xorg by command
  const ProcessDiff& trainer = row_labelled(diff, "rank 0");
  ASSERT_TRUE(trainer.a && trainer.b);
  EXPECT_EQ(trainer.a->pid, 4021U);
  EXPECT_EQ(trainer.b->pid, 7777U);
  EXPECT_EQ(trainer.peak_used_bytes.delta(), static_cast<int64_t>(2000 * mib));
  EXPECT_DOUBLE_EQ(*trainer.peak_used_bytes.delta_percent(), 5.0);
  EXPECT_EQ(trainer.step_count.a, 100U);
  // Steps 1..99 peak at 1001..1099 MiB, step 100 at 2000: nearest-rank median 1050, p99 1099.
  EXPECT_EQ(trainer.step_peak_median_bytes.a, 1050 * mib);
  EXPECT_EQ(trainer.step_peak_p99_bytes.a, 1099 * mib);
  EXPECT_EQ(trainer.step_peak_max_bytes.a, 2000 * mib);
  EXPECT_EQ(trainer.step_peak_max_bytes.b, 2200 * mib);
  EXPECT_EQ(trainer.category_bytes[0].a, 2000 * mib);
  EXPECT_EQ(trainer.category_bytes[0].b, 2200 * mib);
  const ProcessDiff& xorg = row_labelled(diff, "/usr/bin/Xorg :0");
  EXPECT_EQ(xorg.peak_used_bytes.delta(), 0);
}

TEST(RunDiff, GrowthPastTheThresholdOnlyAndNeverForShrinking) {
  const RunProfile a = make_run(4021, 0, 40000, 99, 2000);
  const RunProfile b = make_run(7777, 0, 42000, 99, 2200, "b.vsrec");
  const RunDiff diff = compare_runs(a, b);
  // Process used +5.0% exactly, device used +4.9%, torch peaks +5%, step max +10%.
  const std::vector<std::string> at5 = peaks_grown(diff, 5.0);
  ASSERT_EQ(at5.size(), 1U) << (at5.empty() ? "" : at5[0]);
  EXPECT_NE(at5[0].find("max step peak"), std::string::npos) << at5[0];
  EXPECT_EQ(peaks_grown(diff, 10.0).size(), 0U);
  EXPECT_GE(peaks_grown(diff, 1.0).size(), 4U);
  EXPECT_TRUE(peaks_grown(compare_runs(b, a), 0.0).empty());
}

TEST(RunDiff, UnmatchedProcessesAreListedButAreNoGrowth) {
  const RunProfile a = make_run(4021, 0, 40000, 3, 2000);
  const RunProfile b = make_run(7777, 1, 40000, 3, 2000, "b.vsrec");
  const RunDiff diff = compare_runs(a, b);
  const ProcessDiff& rank0 = row_labelled(diff, "rank 0");
  const ProcessDiff& rank1 = row_labelled(diff, "rank 1");
  EXPECT_TRUE(rank0.a && !rank0.b);
  EXPECT_TRUE(!rank1.a && rank1.b);
  EXPECT_TRUE(peaks_grown(diff, 0.0).empty());
  const std::string text = format_diff_text(a, b, diff, 0.0, {});
  EXPECT_NE(text.find("rank 1  (in B only)"), std::string::npos) << text;
  EXPECT_NE(text.find("No peak grew by more than 0%"), std::string::npos) << text;
}

TEST(RunDiff, WithoutRanksSameCommandThenOrder) {
  RunProfile a = make_run(4021, -1, 40000, 3, 2000);
  RunProfile b = make_run(7777, -1, 41000, 3, 2000, "b.vsrec");
  const RunDiff diff = compare_runs(a, b);
  ASSERT_EQ(diff.processes.size(), 2U);
  for (const ProcessDiff& p : diff.processes) EXPECT_TRUE(p.a && p.b) << p.label;
  EXPECT_EQ(row_labelled(diff, "python train.py --lr 3e-4").peak_used_bytes.delta(),
            static_cast<int64_t>(1000 * mib));
}

TEST(RunDiff, JsonCarriesBothSidesDeltasAndTheVerdict) {
  const RunProfile a = make_run(4021, 0, 40000, 9, 2000);
  const RunProfile b = make_run(7777, 0, 42000, 9, 2200, "b.vsrec");
  const RunDiff diff = compare_runs(a, b);
  const std::vector<std::string> grown = peaks_grown(diff, 5.0);
  const nlohmann::json doc = nlohmann::json::parse(format_diff_json(a, b, diff, 5.0, grown));
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["a"]["file"], "a.vsrec");
  EXPECT_EQ(doc["fail_if_peak_grows_percent"], 5.0);
  EXPECT_EQ(doc["grown"].size(), grown.size());
  const nlohmann::json& trainer = doc["processes"][0];
  EXPECT_EQ(trainer["label"], "rank 0");
  EXPECT_EQ(trainer["a"]["pid"], 4021);
  EXPECT_EQ(trainer["peak_used_bytes"]["delta"], 2000 * mib);
  EXPECT_DOUBLE_EQ(trainer["peak_used_bytes"]["delta_percent"].get<double>(), 5.0);
  EXPECT_EQ(trainer["step_peak_max_bytes"]["b"], 2200 * mib);
  EXPECT_EQ(trainer["category_step_bytes"]["parameters"]["a"], 2000 * mib);
  EXPECT_TRUE(trainer["category_step_bytes"]["gradients"]["delta_percent"].is_null());
}

TEST(RunDiff, ShowsTheNonPyTorchBytesAtEachRunsPeakButNeverCallsThemAGrowth) {
  // B's context grew by 200 MiB (a new CUDA library's modules, say); B's other by 10 MiB.
  const auto paired = [](uint64_t context_mib, uint64_t other_mib) {
    DriverBreakdown parts;
    parts.context_bytes = context_mib * mib;
    parts.other_bytes = other_mib * mib;
    return make_run(4021, 0, 40000, 3, 2000, "a.vsrec", parts);
  };
  const RunProfile a = paired(600, 100);
  const RunProfile b = paired(800, 110);
  const RunDiff diff = compare_runs(a, b);
  const ProcessDiff& trainer = row_labelled(diff, "rank 0");
  EXPECT_EQ(trainer.non_pytorch_at_peak_bytes.a, 700 * mib);
  EXPECT_EQ(trainer.non_pytorch_at_peak_bytes.delta(), static_cast<int64_t>(210 * mib));
  EXPECT_EQ(trainer.context_at_peak_bytes.delta(), static_cast<int64_t>(200 * mib));
  EXPECT_EQ(trainer.other_at_peak_bytes.b, 110 * mib);
  EXPECT_TRUE(peaks_grown(diff, 0.0).empty()) << peaks_grown(diff, 0.0)[0];
  const std::string text = format_diff_text(a, b, diff, std::nullopt, {});
  EXPECT_NE(text.find("non-PyTorch at peak used"), std::string::npos) << text;
  EXPECT_NE(text.find("  context"), std::string::npos) << text;
  const nlohmann::json doc = nlohmann::json::parse(format_diff_json(a, b, diff, std::nullopt, {}));
  EXPECT_EQ(doc["processes"][0]["context_at_peak_bytes"]["delta"], 200 * mib);
  // Xorg has no agent: its rows are empty and not printed.
  EXPECT_TRUE(row_labelled(diff, "/usr/bin/Xorg :0").non_pytorch_at_peak_bytes.a == std::nullopt);
  EXPECT_EQ(text.find("non-PyTorch", text.find("Xorg")), std::string::npos) << text;
}

// A run whose agent polled has step and torch peaks that are at least the values shown: the
// text says which run's are, and the JSON marks that side.
TEST(RunDiff, MarksTheRunWhoseAgentPolledAsSampled) {
  const RunProfile a = make_run(4021, 0, 40000, 9, 2000, "a.vsrec", std::nullopt, true);
  const RunProfile b = make_run(7777, 0, 42000, 9, 2200, "b.vsrec");
  const RunDiff diff = compare_runs(a, b);
  const std::string text = format_diff_text(a, b, diff, std::nullopt, {});
  EXPECT_NE(text.find("torch and step peaks of A: at least these; polling mode"), std::string::npos)
      << text;
  const nlohmann::json doc = nlohmann::json::parse(format_diff_json(a, b, diff, std::nullopt, {}));
  EXPECT_EQ(doc["processes"][0]["a"]["peaks_sampled"], true);
  EXPECT_EQ(doc["processes"][0]["b"]["peaks_sampled"], false);
  const RunDiff exact = compare_runs(b, b);
  EXPECT_EQ(format_diff_text(b, b, exact, std::nullopt, {}).find("polling mode"),
            std::string::npos);
}

// Two runs on GPUs of 2^50 bytes: diff printed "1073741...1073741..." (the columns ran
// together, the last digits gone). Each cell keeps its last digits and a space parts them.
TEST(RunDiff, TooWideNumbersKeepTheirLastDigitsAndTheirColumns) {
  const uint64_t pebibyte_mib = max_plausible_bytes / mib;
  const RunProfile a = make_run(4021, 0, pebibyte_mib - 1000, 3, 2000);
  const RunProfile b = make_run(4021, 0, pebibyte_mib - 2000, 3, 2000, "b.vsrec");
  testing::expect_golden("report/diff_wide_numbers.txt",
                         format_diff_text(a, b, compare_runs(a, b), std::nullopt, {}));
}

TEST(RunDiff, ParsesPercentages) {
  EXPECT_EQ(parse_percent("5%"), 5.0);
  EXPECT_EQ(parse_percent("2.5"), 2.5);
  EXPECT_EQ(parse_percent("0%"), 0.0);
  EXPECT_FALSE(parse_percent(""));
  EXPECT_FALSE(parse_percent("%"));
  EXPECT_FALSE(parse_percent("-1%"));
  EXPECT_FALSE(parse_percent("5%%"));
  EXPECT_FALSE(parse_percent("five"));
  EXPECT_FALSE(parse_percent("nan"));
}

TEST(RunDiff, MatchesThousandsOfCommandsWithoutComparingEachPair) {
  // 16,384 processes a side whose 900-byte commands differ only at the end: pairing each with
  // every other compared ~10^11 bytes (seconds of a forged file's `diff`).
  RunProfile a;
  SystemSample s = testing::make_two_gpu_sample();
  s.devices.resize(1);
  s.allocators.clear();
  s.steps.clear();
  s.ooms.clear();
  ProcessSample p = s.devices[0].processes.at(0);
  p.visible = true;  // its command is kept
  s.devices[0].processes.clear();
  for (uint32_t k = 0; k < 16000; ++k) {
    p.pid = 100000 + k;
    p.command = std::string(890, 'c') + std::to_string(1000000 + k);
    s.devices[0].processes.push_back(p);
  }
  a.summary.add(s);
  // B's pids run the other way: its processes (in pid order) come in reverse command order.
  for (ProcessSample& q : s.devices[0].processes) q.pid = 300000 - q.pid;
  RunProfile b;
  b.summary.add(s);
  ASSERT_EQ(a.summary.processes().size(), 16000U);
  EXPECT_EXIT(
      {
        testing::limit_cpu_seconds(2);
        const RunDiff diff = compare_runs(a, b);
        std::size_t paired = 0;
        for (const ProcessDiff& row : diff.processes) {
          paired +=
              row.a && row.b && !row.a->command.empty() && row.a->command == row.b->command ? 1 : 0;
        }
        ::_exit(paired == 16000 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace vramscope::report
