// tests/cpp/report/test_row_files.cpp -- CSV / JSONL files hold exactly the report formatters' rows
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "exporters/fixtures.hpp"
#include "exporters/golden.hpp"
#include "exporters/temp_dir.hpp"
#include "vramscope/report/json_report.hpp"
#include "vramscope/report/row_files.hpp"

namespace vramscope::report {
namespace {

TEST(RowFiles, CsvHasOneHeaderThenTheFormatterRows) {
  test::TempDir dir;
  const SystemSample sample = test::make_rich_sample();
  {
    report::CsvFileSink sink(dir.file("d.csv"), report::CsvRows::Devices, false);
    sink.write(sample);
    sink.write(sample);
  }
  const std::string rows = report::csv_rows(sample, report::CsvRows::Devices);
  EXPECT_EQ(test::read_file(dir.file("d.csv")),
            report::csv_header(report::CsvRows::Devices) + rows + rows);
}

TEST(RowFiles, ProcessRowsUseTheProcessHeader) {
  test::TempDir dir;
  { report::CsvFileSink sink(dir.file("p.csv"), report::CsvRows::Processes, false); }
  EXPECT_EQ(test::read_file(dir.file("p.csv")), report::csv_header(report::CsvRows::Processes));
}

TEST(RowFiles, StepRowsCarryCategoriesOrEmptyFields) {
  test::TempDir dir;
  const SystemSample sample = test::make_rich_sample();
  {
    report::CsvFileSink sink(dir.file("s.csv"), report::CsvRows::Steps, false);
    sink.write(sample);
  }
  const auto lines = test::split_lines(test::read_file(dir.file("s.csv")));
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(
      lines[0],
      "timestamp_ns,hostname,pid,rank,cuda_device,device_uuid,step,end_ns,duration_ns,"
      "peak_allocated_bytes,peak_reserved_bytes,peak_requested_bytes,allocated_bytes,"
      "reserved_bytes,"
      "category_parameters_bytes,category_gradients_bytes,category_optimizer_state_bytes,"
      "category_activations_bytes,category_temporaries_bytes,category_other_bytes,peaks_exact\r");
  const std::string rank0_tail = ",3221225472,3221225472,6442450944,1069547520,3145728,0,1\r";
  EXPECT_EQ(lines[1].substr(0, 24), "1700000000000000000,node");
  EXPECT_EQ(lines[1].substr(lines[1].size() - rank0_tail.size()), rank0_tail) << lines[1];
  EXPECT_EQ(lines[2].substr(lines[2].size() - 9), ",,,,,,,1\r") << "rank 1: empty, never 0";
  const auto count_fields = [](const std::string& line) {
    return std::count(line.begin(), line.end(), ',') + 1;
  };
  EXPECT_EQ(count_fields(lines[1]), count_fields(lines[0]));
  EXPECT_EQ(count_fields(lines[2]), count_fields(lines[0]));
}

TEST(RowFiles, JsonlIsOneParsableDocumentPerLine) {
  test::TempDir dir;
  SystemSample sample = test::make_rich_sample();
  {
    report::JsonlFileSink sink(dir.file("s.jsonl"), false);
    for (int i = 0; i < 3; ++i) {
      sample.timestamp_ns += 1000;
      sink.write(sample);
    }
  }
  const auto lines = test::split_lines(test::read_file(dir.file("s.jsonl")));
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(nlohmann::json::parse(lines[2])["timestamp_ns"].get<int64_t>(), sample.timestamp_ns);
  EXPECT_EQ(lines[2], report::format_sample_json(sample, false));
  const nlohmann::json steps = nlohmann::json::parse(lines[2])["steps"];
  ASSERT_EQ(steps.size(), 2U);
  EXPECT_EQ(steps[0]["category_bytes"]["optimizer_state"].get<uint64_t>(), 6 * test::gib);
  EXPECT_TRUE(steps[1]["category_bytes"].is_null()) << "no categories is null, not zeros";
}

TEST(RowFiles, StepsOfAPollingProcessAreMarkedNotExactInCsvAndJson) {
  SystemSample sample = test::make_rich_sample();
  // Rank 1's agent polls (cudaMallocAsync): its step peaks are the highest its polls saw.
  ASSERT_EQ(sample.allocators.size(), 2U);
  ASSERT_EQ(sample.steps.size(), 2U);
  ASSERT_EQ(sample.allocators[1].pid, sample.steps[1].pid);
  sample.allocators[1].polling_only = true;
  const PolledSteps polled(sample);
  EXPECT_FALSE(polled.sampled(sample.steps[0]));
  EXPECT_TRUE(polled.sampled(sample.steps[1]));
  // The same pid on another device is another process's record: it does not mark this step.
  SystemSample other_device = sample;
  other_device.allocators[1].device_uuid = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
  EXPECT_FALSE(PolledSteps(other_device).sampled(other_device.steps[1]));

  const auto lines = test::split_lines(report::csv_rows(sample, report::CsvRows::Steps));
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0].substr(lines[0].size() - 3), ",1\r");
  EXPECT_EQ(lines[1].substr(lines[1].size() - 3), ",0\r");
  std::string streamed;
  write_sample_json(sample, [&streamed](std::string_view piece) { streamed += piece; });
  for (const std::string& text : {format_sample_json(sample, true), streamed}) {
    const nlohmann::json steps = nlohmann::json::parse(text)["steps"];
    ASSERT_EQ(steps.size(), 2U);
    EXPECT_TRUE(steps[0]["peaks_exact"].get<bool>());
    EXPECT_FALSE(steps[1]["peaks_exact"].get<bool>());
  }
}

}  // namespace
}  // namespace vramscope::report
