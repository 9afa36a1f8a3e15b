// tests/cpp/exporters/test_row_files.cpp -- CSV / JSONL files hold exactly the report formatters' rows
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "exporters/row_files.hpp"
#include "fixtures.hpp"
#include "report/json_report.hpp"
#include "golden.hpp"
#include "temp_dir.hpp"

namespace vramscope::exporters {
namespace {

TEST(RowFiles, CsvHasOneHeaderThenTheFormatterRows) {
  test::TempDir dir;
  const SystemSample sample = test::make_rich_sample();
  {
    CsvFileSink sink(dir.file("d.csv"), report::CsvRows::Devices, false);
    sink.write(sample);
    sink.write(sample);
  }
  const std::string rows = report::csv_rows(sample, report::CsvRows::Devices);
  EXPECT_EQ(test::read_file(dir.file("d.csv")), report::csv_header(report::CsvRows::Devices) + rows + rows);
}

TEST(RowFiles, ProcessRowsUseTheProcessHeader) {
  test::TempDir dir;
  { CsvFileSink sink(dir.file("p.csv"), report::CsvRows::Processes, false); }
  EXPECT_EQ(test::read_file(dir.file("p.csv")), report::csv_header(report::CsvRows::Processes));
}

TEST(RowFiles, JsonlIsOneParsableDocumentPerLine) {
  test::TempDir dir;
  SystemSample sample = test::make_rich_sample();
  {
    JsonlFileSink sink(dir.file("s.jsonl"), false);
    for (int i = 0; i < 3; ++i) {
      sample.timestamp_ns += 1000;
      sink.write(sample);
    }
  }
  const auto lines = test::split_lines(test::read_file(dir.file("s.jsonl")));
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(nlohmann::json::parse(lines[2])["timestamp_ns"].get<int64_t>(), sample.timestamp_ns);
  EXPECT_EQ(lines[2], report::format_sample_json(sample, false));
}

}  // namespace
}  // namespace vramscope::exporters
