// tests/cpp/report/test_csv_report.cpp -- CSV rows and RFC 4180 quoting
#include <gtest/gtest.h>

#include "golden.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/report/csv_report.hpp"

namespace vramscope::report {
namespace {

using testing::make_two_gpu_sample;

TEST(Csv, QuotesOnlyWhatNeedsQuoting) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field(""), "");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\rhere"), "\"cr\rhere\"");
  EXPECT_EQ(csv_field(" padded"), "\" padded\"");
}

TEST(Csv, DeviceRowsMatchGolden) {
  testing::expect_golden(
      "report/two_gpus_devices.csv",
      csv_header(CsvRows::Devices) + csv_rows(make_two_gpu_sample(), CsvRows::Devices));
}

TEST(Csv, ProcessRowsMatchGolden) {
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[1].command = "sh -c \"echo a, b\"";
  testing::expect_golden("report/two_gpus_processes.csv",
                         csv_header(CsvRows::Processes) + csv_rows(s, CsvRows::Processes));
}

TEST(Csv, EveryRowHasTheHeaderFieldCount) {
  SystemSample s = make_two_gpu_sample();
  s.devices[1].reserved_bytes.reset();
  for (CsvRows rows : {CsvRows::Devices, CsvRows::Processes}) {
    const std::string header = csv_header(rows);
    const auto fields = [](const std::string& line) {
      // No quoted commas in this sample: counting commas counts fields.
      return std::count(line.begin(), line.end(), ',') + 1;
    };
    const std::string body = csv_rows(s, rows);
    ASSERT_FALSE(body.empty());
    std::size_t start = 0;
    for (std::size_t end = body.find("\r\n"); end != std::string::npos;
         start = end + 2, end = body.find("\r\n", start)) {
      EXPECT_EQ(fields(body.substr(start, end - start)), fields(header));
    }
  }
}

TEST(Csv, UnsupportedIsAnEmptyField) {
  SystemSample s = make_two_gpu_sample();
  s.devices[0].reserved_bytes.reset();
  const std::string row = csv_rows(s, CsvRows::Devices);
  EXPECT_NE(row.find("00000000:01:00.0,150754820096,,"), std::string::npos) << row;
}

}  // namespace
}  // namespace vramscope::report
