// tests/cpp/exporters/test_chrome_trace.cpp -- trace JSON golden, counter de-duplication, size bound
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "fixtures.hpp"
#include "golden.hpp"
#include "temp_dir.hpp"
#include "vramscope/exporters/chrome_trace.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {
namespace {

using nlohmann::json;

/// Two samples one second apart: GPU0 used grows, everything else unchanged.
std::vector<SystemSample> two_samples() {
  SystemSample first = test::make_rich_sample();
  SystemSample second = first;
  second.timestamp_ns += 1000000000;
  *second.devices[0].used_bytes += test::gib;
  second.allocators[0].allocated_bytes += test::gib;
  second.steps.clear();
  second.ooms.clear();
  return {first, second};
}

TEST(ChromeTrace, MatchesGoldenAndIsValidJson) {
  test::TempDir dir;
  {
    ChromeTraceWriter writer(dir.file("trace.json"), {});
    for (const auto& sample : two_samples()) writer.write(sample);
  }
  const std::string text = test::read_file(dir.file("trace.json"));
  const json trace = json::parse(text);  // throws (fails the test) on invalid JSON
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  test::expect_golden("chrome_trace_two_samples.json", text);
}

// A step of a process whose agent polls says so in its args: its peaks are at least those.
TEST(ChromeTrace, StepsOfAPollingAgentSayTheirPeaksAreNotExact) {
  test::TempDir dir;
  ChromeTraceWriter writer(dir.file("trace.json"), {});
  SystemSample sample = test::make_rich_sample();
  sample.allocators[1].polling_only = true;
  writer.write(sample);
  writer.close();
  const json trace = json::parse(test::read_file(dir.file("trace.json")));
  std::map<int64_t, bool> exact_by_rank;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "X") exact_by_rank[event["args"]["rank"]] = event["args"]["peaks_exact"];
  }
  EXPECT_EQ(exact_by_rank, (std::map<int64_t, bool>{{0, true}, {1, false}}));
}

TEST(ChromeTrace, CountersStepsAndOomsHaveTheExpectedShape) {
  test::TempDir dir;
  ChromeTraceWriter writer(dir.file("trace.json"), {});
  for (const auto& sample : two_samples()) writer.write(sample);
  writer.close();
  const json trace = json::parse(test::read_file(dir.file("trace.json")));
  std::map<std::string, std::vector<uint64_t>> counters;
  int steps = 0;
  int ooms = 0;
  std::set<std::string> process_names;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "C")
      counters[event["name"].get<std::string>() + "@" + std::to_string(event["pid"].get<int64_t>())]
          .push_back(event["args"]["bytes"]);
    if (event["ph"] == "X") {
      ++steps;
      EXPECT_EQ(event["args"]["peak_allocated_bytes"], 13 * test::gib);
      EXPECT_TRUE(event["args"].contains("rank"));
      EXPECT_EQ(event["args"]["peaks_exact"], true);
      EXPECT_DOUBLE_EQ(event["dur"].get<double>(), 250000.0);
    }
    if (event["ph"] == "i") {
      ++ooms;
      EXPECT_EQ(event["s"], "g");
      EXPECT_EQ(event["args"]["requested_bytes"], 8 * test::gib);
    }
    if (event["ph"] == "M" && event["name"] == "process_name")
      process_names.insert(event["args"]["name"]);
  }
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(ooms, 1);
  // Used changed: two points. Free unchanged: first point plus the extension to the end.
  EXPECT_EQ(counters["GPU0 used@100000000"],
            (std::vector<uint64_t>{40 * test::gib, 41 * test::gib}));
  EXPECT_EQ(counters["GPU0 free@100000000"].size(), 2U);
  EXPECT_EQ(counters["GPU0 torch allocated@4242"],
            (std::vector<uint64_t>{12 * test::gib, 13 * test::gib}));
  EXPECT_EQ(counters.count("GPU0 torch reserved@4243"), 1U);
  EXPECT_EQ(counters.count("GPU1 driver used@5000"), 1U);
  EXPECT_EQ(counters.count("GPU0 driver used@999"), 0U)
      << "unavailable value must not become a counter";
  EXPECT_EQ(process_names.count("pid 4243 rank 1/2 (python train.py --cfg \"a b\")"), 1U);
  EXPECT_EQ(trace["otherData"]["dropped_events"], 0);
}

TEST(ChromeTrace, StepCategoriesAreCounterTracksOfTheirProcess) {
  test::TempDir dir;
  ChromeTraceWriter writer(dir.file("trace.json"), {});
  for (const auto& sample : two_samples()) writer.write(sample);
  writer.close();
  const json trace = json::parse(test::read_file(dir.file("trace.json")));
  std::map<std::string, std::vector<std::pair<double, uint64_t>>> counters;
  json rank0_args;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == "C") {
      counters[event["name"].get<std::string>() + "@" + std::to_string(event["pid"].get<int64_t>())]
          .emplace_back(event["ts"].get<double>(), event["args"]["bytes"].get<uint64_t>());
    }
    if (event["ph"] == "X" && event["pid"] == 4242) rank0_args = event["args"];
  }
  const SystemSample first = two_samples()[0];
  const StepRecord& step = first.steps[0];
  const double start_us = static_cast<double>(step.end_ns - step.duration_ns) / 1000.0;
  for (std::size_t c = 0; c < memory_category_count; ++c) {
    const std::string name = "GPU0 step peak " + std::string(memory_category_names[c]) + "@4242";
    ASSERT_EQ(counters.count(name), 1U) << name;
    // Set at the step's start; repeated at the last sample so the track reaches the end.
    ASSERT_FALSE(counters[name].empty());
    EXPECT_DOUBLE_EQ(counters[name][0].first, start_us) << name;
    EXPECT_EQ(counters[name][0].second, (*step.category_bytes)[c]) << name;
    EXPECT_EQ(rank0_args["category_bytes"][std::string(memory_category_names[c])],
              (*step.category_bytes)[c]);
    EXPECT_EQ(counters.count("GPU0 step peak " + std::string(memory_category_names[c]) + "@4243"),
              0U)
        << "rank 1 tracks no categories";
  }
}

TEST(ChromeTrace, MaxEventsBoundsTheFileAndStaysValid) {
  test::TempDir dir;
  ChromeTraceOptions options;
  options.max_events = 50;
  ChromeTraceWriter writer(dir.file("trace.json"), options);
  SystemSample sample = test::make_large_sample(2, 8);
  for (int i = 0; i < 100; ++i) {
    sample.timestamp_ns += 1000000;
    *sample.devices[0].used_bytes += 1;
    writer.write(sample);
  }
  writer.close();
  const json trace = json::parse(test::read_file(dir.file("trace.json")));
  std::size_t bounded = 0;
  for (const json& event : trace["traceEvents"])
    bounded += event["ph"] == "C" || event["ph"] == "X";
  EXPECT_LE(bounded, 50U + 2U * 3U + 16U);  // the bound plus one end-extension per track
  EXPECT_GT(trace["otherData"]["dropped_events"].get<uint64_t>(), 0U);
  EXPECT_EQ(writer.events_dropped(), trace["otherData"]["dropped_events"].get<uint64_t>());
}

TEST(ChromeTrace, InvalidUtf8InNamesStillGivesValidJson) {
  test::TempDir dir;
  SystemSample sample = test::make_rich_sample();
  for (auto& device : sample.devices) {
    for (auto& process : device.processes) process.command = "python \xFF\xFE train.py";
  }
  sample.allocators[0].device_uuid = "GPU-\xC3";
  sample.hostname = "host\x80";
  {
    ChromeTraceWriter writer(dir.file("trace.json"), {});
    ASSERT_NO_THROW(writer.write(sample));
    ASSERT_NO_THROW(writer.close());
  }
  const std::string text = test::read_file(dir.file("trace.json"));
  ASSERT_TRUE(json::accept(text)) << text.substr(0, 200);
  EXPECT_EQ(json::parse(text)["otherData"]["hostname"], "host\xEF\xBF\xBD");
}

TEST(ChromeTrace, FileIsPrivateAndNotOverwritten) {
  test::TempDir dir;
  { ChromeTraceWriter writer(dir.file("t.json"), {}); }
  struct stat info {};
  ASSERT_EQ(::stat(dir.file("t.json").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777U, 0600U);
  EXPECT_THROW(ChromeTraceWriter(dir.file("t.json"), {}), Error);
  ChromeTraceOptions overwrite;
  overwrite.overwrite = true;
  EXPECT_NO_THROW(ChromeTraceWriter(dir.file("t.json"), overwrite));
  // An empty trace is still valid JSON.
  EXPECT_TRUE(json::accept(test::read_file(dir.file("t.json"))));
}

}  // namespace
}  // namespace vramscope::exporters
