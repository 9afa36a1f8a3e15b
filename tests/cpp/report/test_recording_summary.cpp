// tests/cpp/report/test_recording_summary.cpp -- peaks, their times, steps and the show outputs
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "golden.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/report/watch_line.hpp"

namespace vramscope::report {
namespace {

using testing::make_two_gpu_sample;
using testing::mib;

/// Three samples 1 s apart; GPU 0's use peaks in the second, the trainer's agent in the third.
RecordingSummary three_samples() {
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  const int64_t t0 = s.timestamp_ns;
  summary.add(s);

  s.timestamp_ns = t0 + 1'000'000'000;
  s.devices[0].used_bytes = 90000 * mib;
  s.devices[0].processes[0].used_bytes = 50000 * mib;
  summary.add(s);

  s.timestamp_ns = t0 + 2'000'000'000;
  s.devices[0].used_bytes = 10000 * mib;
  s.devices[0].processes[0].used_bytes = 9000 * mib;
  s.allocators[0].allocated_bytes = 1000 * mib;
  s.allocators[0].peak_allocated_bytes = 40000 * mib;
  s.allocators[0].peak_reserved_bytes = 45000 * mib;
  s.allocators[0].step = 12;
  s.allocators[0].step_peak_allocated_bytes = 39000 * mib;
  StepRecord step;
  step.pid = 4021;
  step.device_uuid = s.devices[0].uuid;
  step.step = 13;
  step.peak_allocated_bytes = 41000 * mib;
  s.steps.push_back(step);
  s.ooms.push_back(OomRecord{});
  summary.add(s);
  return summary;
}

TEST(RecordingSummary, KeepsPeaksAndWhenTheyHappened) {
  const RecordingSummary summary = three_samples();
  EXPECT_EQ(summary.sample_count(), 3U);
  EXPECT_EQ(summary.end_ns() - summary.start_ns(), 2'000'000'000);
  EXPECT_EQ(summary.oom_count(), 1U);
  const DevicePeak& gpu0 = summary.devices().begin()->second;
  EXPECT_EQ(gpu0.peak_used_bytes, 90000 * mib);
  EXPECT_EQ(gpu0.peak_offset_ns, 1'000'000'000);

  const ProcessPeak& trainer = summary.processes().at({4021, gpu0.uuid});
  EXPECT_EQ(trainer.peak_used_bytes, 50000 * mib);
  EXPECT_EQ(trainer.peak_offset_ns, 1'000'000'000);
  EXPECT_EQ(trainer.torch_peak_allocated_bytes, 40000 * mib);
  EXPECT_EQ(trainer.torch_peak_reserved_bytes, 45000 * mib);
  // The step record (13, 41000 MiB) is newer and higher than the agent's published step.
  EXPECT_EQ(trainer.step_count, 13U);
  EXPECT_EQ(trainer.max_step_peak_allocated_bytes, 41000 * mib);
  EXPECT_EQ(trainer.command, "python train.py --lr 3e-4");

  const ProcessPeak& xorg = summary.processes().at({5177, gpu0.uuid});
  EXPECT_FALSE(xorg.torch_peak_allocated_bytes);
  EXPECT_FALSE(xorg.step_count);
}

TEST(RecordingSummary, ProcessesThatChangePlacesKeepTheirOwnPeaks) {
  // add() first tries the entry the same row found in the previous sample: the trainer and
  // Xorg swap places, so each must find its own entry, not its predecessor's.
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  summary.add(s);
  std::swap(s.devices[0].processes[0], s.devices[0].processes[1]);
  s.devices[0].processes[0].used_bytes = 2000 * mib;   // Xorg
  s.devices[0].processes[1].used_bytes = 31000 * mib;  // the trainer
  s.timestamp_ns += 1'000'000'000;
  summary.add(s);
  const std::string& uuid = s.devices[0].uuid;
  EXPECT_EQ(summary.processes().at({5177, uuid}).peak_used_bytes, 2000 * mib);
  EXPECT_EQ(summary.processes().at({4021, uuid}).peak_used_bytes, 31000 * mib);
  EXPECT_EQ(summary.processes().at({4021, uuid}).command, "python train.py --lr 3e-4");
}

TEST(RecordingSummary, ACopyAddsToItsOwnEntries) {
  // What add() remembers of the last sample points into its own summary: a copy that goes on
  // must not raise the peaks of the summary it was copied from.
  RecordingSummary first;
  SystemSample s = make_two_gpu_sample();
  first.add(s);
  RecordingSummary second = first;
  s.devices[0].processes[0].used_bytes = 60000 * mib;
  s.timestamp_ns += 1'000'000'000;
  second.add(s);
  const std::string& uuid = s.devices[0].uuid;
  EXPECT_EQ(first.processes().at({4021, uuid}).peak_used_bytes, 30000 * mib);
  EXPECT_EQ(second.processes().at({4021, uuid}).peak_used_bytes, 60000 * mib);
  RecordingSummary third;
  third = second;
  s.devices[0].processes[0].used_bytes = 70000 * mib;
  third.add(s);
  EXPECT_EQ(second.processes().at({4021, uuid}).peak_used_bytes, 60000 * mib);
  EXPECT_EQ(third.processes().at({4021, uuid}).peak_used_bytes, 70000 * mib);
}

TEST(RecordingSummary, JsonUsesNullsAndIntegers) {
  RecordingMetadata metadata;
  metadata.format_version = 1;
  metadata.interval_ns = 100'000'000;
  metadata.hostname = "node-7";
  const nlohmann::json doc = nlohmann::json::parse(
      format_summary_json("r.vsrec", metadata, three_samples(), {TailState::Truncated, "torn"}));
  EXPECT_EQ(doc["tail"]["state"], "truncated");
  EXPECT_EQ(doc["tail"]["message"], "torn");
  EXPECT_EQ(doc["command"], nullptr);
  EXPECT_EQ(doc["duration_ns"], 2'000'000'000);
  EXPECT_EQ(doc["oom_count"], 1);
  EXPECT_EQ(doc["devices"][0]["peak_used_bytes"].get<uint64_t>(), 90000 * mib);
  bool saw_plain_process = false;
  for (const auto& p : doc["processes"]) {
    if (p["pid"] == 5177) {
      saw_plain_process = true;
      EXPECT_EQ(p["torch_peak_allocated_bytes"], nullptr);
      EXPECT_EQ(p["step_count"], nullptr);
    }
  }
  EXPECT_TRUE(saw_plain_process);
}

TEST(RecordingSummary, JsonReplacesInvalidUtf8InRecordedText) {
  RecordingMetadata metadata;
  metadata.hostname = "node\xFF";
  metadata.command = "vramscope record -- python t\xC3.py";
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[0].command = "python \x80";
  summary.add(s);
  std::string text;
  ASSERT_NO_THROW(text = format_summary_json("r.vsrec", metadata, summary, {}));
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["hostname"], "node\xEF\xBF\xBD");
  EXPECT_EQ(doc["command"], "vramscope record -- python t\xEF\xBF\xBD.py");
}

TEST(RecordingSummary, ExtremeTimestampsSaturateInsteadOfOverflowing) {
  // A forged recording may stamp samples anywhere in the int64 range; show --json once printed
  // a duration of -2^63 (and UBSan flagged the subtraction).
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  s.timestamp_ns = INT64_MAX;
  summary.add(s);
  s.timestamp_ns = INT64_MIN;
  summary.add(s);
  EXPECT_EQ(summary.start_ns(), INT64_MIN);
  EXPECT_EQ(summary.end_ns(), INT64_MAX);
  const nlohmann::json doc =
      nlohmann::json::parse(format_summary_json("r.vsrec", {}, summary, {TailState::Clean, ""}));
  EXPECT_EQ(doc["duration_ns"].get<int64_t>(), INT64_MAX);
  EXPECT_NO_THROW(format_summary_text("r.vsrec", {}, summary, {}));

  RecordingSummary negative;
  s.timestamp_ns = -5'000'000'000;
  negative.add(s);
  EXPECT_EQ(negative.end_ns(), -5'000'000'000) << "the end is a sample's time, not 0";
}

TEST(RecordingSummary, ShowsWhatTheLargestCategorisedStepPeakWasMadeOf) {
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  StepRecord step;
  step.pid = 4021;
  step.device_uuid = s.devices[0].uuid;
  step.step = 4;
  step.peak_requested_bytes = 7000 * mib;
  step.category_bytes = CategoryBytes{1000 * mib, 1000 * mib, 2000 * mib, 2500 * mib, 500 * mib, 0};
  s.steps.push_back(step);
  summary.add(s);
  // A later step with a lower peak and one without categories at a higher peak: neither wins.
  s.steps[0].step = 5;
  s.steps[0].peak_requested_bytes = 6000 * mib;
  s.steps[0].category_bytes = CategoryBytes{1, 1, 1, 1, 1, 1};
  StepRecord untracked = step;
  untracked.step = 6;
  untracked.peak_requested_bytes = 9000 * mib;
  untracked.category_bytes.reset();
  s.steps.push_back(untracked);
  summary.add(s);

  RecordingMetadata metadata;
  const std::string text = format_summary_text("c.vsrec", metadata, summary, {});
  EXPECT_NE(
      text.find(
          "      step 4 peak: parameters 1000MiB, gradients 1000MiB, optimizer_state 2000MiB, "
          "activations 2500MiB, temporaries 500MiB, other 0MiB\n"),
      std::string::npos)
      << text;
  EXPECT_EQ(text.find("step 5 peak"), std::string::npos) << text;
  const nlohmann::json doc =
      nlohmann::json::parse(format_summary_json("c.vsrec", metadata, summary, {}));
  for (const auto& p : doc["processes"]) {
    if (p["pid"] == 4021) {
      EXPECT_EQ(p["category_step"], 4);
      EXPECT_EQ(p["category_step_bytes"]["optimizer_state"].get<uint64_t>(), 2000 * mib);
    } else {
      EXPECT_EQ(p["category_step"], nullptr);
      EXPECT_EQ(p["category_step_bytes"], nullptr);
    }
  }
}

/// A settled pairing of the trainer's: context and other as given, NCCL 2.28.9 not reporting.
DriverBreakdown pairing(uint64_t context_mib, uint64_t other_mib, uint64_t pools_mib) {
  DriverBreakdown b;
  b.paired_ns = 1'700'000'000'000'000'000;
  b.reserved_bytes = 24576 * mib;
  b.context_bytes = context_mib * mib;
  b.other_bytes = other_mib * mib;
  b.private_pool_bytes = pools_mib * mib;
  b.driver_bytes = b.reserved_bytes + b.context_bytes + *b.other_bytes;
  b.nccl_version = 22809;
  return b;
}

TEST(RecordingSummary, NamesTheNonPyTorchBytesAtEachProcesssUsedPeak) {
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  ProcessSample& trainer = s.devices[0].processes[0];
  ASSERT_EQ(trainer.pid, 4021U);
  trainer.used_bytes = 30000 * mib;
  s.allocators[0].breakdown = pairing(600, 100, 0);
  summary.add(s);
  s.timestamp_ns += 1'000'000'000;  // the used peak, with another pairing
  trainer.used_bytes = 50000 * mib;
  s.allocators[0].breakdown = pairing(650, 150, 12);
  summary.add(s);
  s.timestamp_ns += 1'000'000'000;  // lower: the peak's pairing stays
  trainer.used_bytes = 40000 * mib;
  s.allocators[0].breakdown = pairing(900, 900, 0);
  summary.add(s);

  const ProcessPeak& peak = summary.processes().at({4021, s.devices[0].uuid});
  ASSERT_TRUE(peak.parts_at_peak.has_value());
  EXPECT_EQ(peak.parts_at_peak->context_bytes, 650 * mib);
  EXPECT_EQ(peak.parts_at_peak->other_bytes, 150 * mib);
  RecordingMetadata metadata;
  const std::string text = format_summary_text("p.vsrec", metadata, summary, {});
  EXPECT_NE(text.find("      at the used peak: non-PyTorch 800MiB = context 650MiB + other 150MiB "
                      "(NCCL 2.28.9 within); 12MiB of reserved in private pools\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("at the used peak", text.find("pid 5177")), std::string::npos)
      << "a process without an agent has no parts: " << text;
  const nlohmann::json doc =
      nlohmann::json::parse(format_summary_json("p.vsrec", metadata, summary, {}));
  for (const auto& p : doc["processes"]) {
    if (p["pid"] == 4021) {
      EXPECT_EQ(p["driver_parts_at_peak"]["non_pytorch_bytes"].get<uint64_t>(), 800 * mib);
      EXPECT_EQ(p["driver_parts_at_peak"]["private_pool_bytes"].get<uint64_t>(), 12 * mib);
      EXPECT_EQ(p["driver_parts_at_peak"]["nccl"], "not reported by NCCL 2.28.9");
    } else {
      EXPECT_EQ(p["driver_parts_at_peak"], nullptr);
    }
  }

  // A new peak in a sample without a pairing (the agent had none yet, or a format 3 file joined
  // with it) leaves the peak unnamed, never the parts of another moment.
  s.timestamp_ns += 1'000'000'000;
  trainer.used_bytes = 60000 * mib;
  s.allocators[0].breakdown.reset();
  summary.add(s);
  EXPECT_FALSE(summary.processes().at({4021, s.devices[0].uuid}).parts_at_peak.has_value());
  EXPECT_EQ(format_summary_text("p.vsrec", metadata, summary, {}).find("at the used peak"),
            std::string::npos);
}

TEST(RecordingSummary, APollingProcesssPeaksAreMarkedSampledWithItsReason) {
  RecordingSummary summary;
  SystemSample s = make_two_gpu_sample();
  s.allocators[0].step = 3;
  s.allocators[0].step_peak_allocated_bytes = 21000 * mib;
  summary.add(s);
  RecordingMetadata metadata;
  const std::string exact = format_summary_text("p.vsrec", metadata, summary, {});
  EXPECT_EQ(exact.find("≥"), std::string::npos) << exact;
  s.timestamp_ns += 1'000'000'000;
  s.allocators[0].polling_only = true;
  s.allocators[0].polling_reason =
      "no C++ compiler (c++, g++ or clang++; or $CXX) to build the agent for torch "
      "2.16.0+cu130, which this vramscope carries none for; install one (Debian/Ubuntu: apt "
      "install g++; Fedora/RHEL: dnf install gcc-c++)";
  summary.add(s);
  const std::string text = format_summary_text("p.vsrec", metadata, summary, {});
  EXPECT_NE(text.find("torch alloc ≥20480MiB resv ≥24576MiB, 3 steps, max step peak ≥21000MiB"),
            std::string::npos)
      << text;
  // The reason wrapped whole under the process: its fix is its end.
  EXPECT_NE(text.find("      ≥: polling mode, peaks sampled, not exact: no C++ compiler"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("dnf install gcc-c++)\n"), std::string::npos) << text;
  const nlohmann::json doc =
      nlohmann::json::parse(format_summary_json("p.vsrec", metadata, summary, {}));
  for (const auto& p : doc["processes"]) {
    EXPECT_EQ(p["peaks_sampled"], p["pid"] == 4021) << p;
    if (p["pid"] == 4021) {
      EXPECT_EQ(p["polling_reason"], s.allocators[0].polling_reason);
    } else {
      EXPECT_EQ(p["polling_reason"], nullptr);
    }
  }
}

// A GPU of 2^50 bytes (the most a reader takes) showed as "107374...": a right-aligned cell
// too wide for its column keeps its last digits after a leading "…" (docs/security.md).
TEST(RecordingSummary, TooWideNumbersKeepTheirLastDigits) {
  setenv("TZ", "UTC", 1);
  tzset();
  SystemSample s = make_two_gpu_sample();
  s.devices[0].total_bytes = max_plausible_bytes;
  s.devices[0].used_bytes = max_plausible_bytes - 1;
  s.devices[0].processes[0].used_bytes = max_plausible_bytes - 2;
  RecordingSummary summary;
  summary.add(s);
  RecordingMetadata metadata;
  metadata.format_version = 4;
  metadata.writer_version = "0.1.0";
  metadata.hostname = "node-7";
  metadata.interval_ns = 100'000'000;
  testing::expect_golden("report/show_wide_numbers.txt",
                         format_summary_text("wide.vsrec", metadata, summary, {}));
}

TEST(RecordingSummary, EmptyRecordingSaysSo) {
  RecordingMetadata metadata;
  const RecordingSummary empty;
  const std::string text = format_summary_text("e.vsrec", metadata, empty, {});
  EXPECT_NE(text.find("Span      no samples"), std::string::npos) << text;
  const nlohmann::json doc =
      nlohmann::json::parse(format_summary_json("e.vsrec", metadata, empty, {}));
  EXPECT_EQ(doc["start_ns"], nullptr);
  EXPECT_EQ(doc["sample_count"], 0);
}

TEST(WatchLine, SumsAgentsPerGpuAndMarksLostOnes) {
  setenv("TZ", "UTC", 1);
  tzset();
  SystemSample s = make_two_gpu_sample();
  s.devices[1].lost = true;
  s.devices[1].error = "GPU is lost";
  EXPECT_EQ(
      format_watch_lines(s, UnitStyle::Mib),
      "22:13:20.123  gpu 0  used 40961MiB  free 102290MiB  torch alloc 20480MiB resv 24576MiB\n"
      "22:13:20.123  gpu 1  GPU lost: GPU is lost\n");
}

}  // namespace
}  // namespace vramscope::report
