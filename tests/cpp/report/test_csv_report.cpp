// tests/cpp/report/test_csv_report.cpp -- CSV rows and RFC 4180 quoting
#include <gtest/gtest.h>

#include <string>
#include <string_view>

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
  EXPECT_EQ(csv_field(" padded"), "\" padded\"");
  EXPECT_EQ(csv_field("padded "), "\"padded \"");
  EXPECT_EQ(csv_field("GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00"),
            "GPU-5d0c1a52-1c2e-4c3f-9b7e-0a1b2c3d4e00");
  EXPECT_EQ(csv_field("caf\xC3\xA9, \xE2\x82\xAC"), "\"caf\xC3\xA9, \xE2\x82\xAC\"");
}

// Another user's command line reaches the terminal through `--csv --processes` and `watch -f
// csv`: escape sequences, BEL, CR and ill-formed UTF-8 must not.
TEST(Csv, ControlCharactersAndIllFormedUtf8BecomeReplacementCharacters) {
  EXPECT_EQ(csv_field("a\x1B]0;pwned\x07"
                      "b"),
            "a\xEF\xBF\xBD]0;pwned\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(csv_field("two\nlines"), "two\xEF\xBF\xBDlines");
  EXPECT_EQ(csv_field("cr\rhere"), "cr\xEF\xBF\xBDhere");
  EXPECT_EQ(csv_field(std::string_view("nul\0del\x7F", 8)),
            "nul\xEF\xBF\xBD"
            "del\xEF\xBF\xBD");
  EXPECT_EQ(csv_field("csi\xC2\x9B"
                      "31m"),
            "csi\xEF\xBF\xBD"
            "31m");
  EXPECT_EQ(csv_field("bad\xFF\xC3"), "bad\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(csv_field("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
}

// OWASP CSV injection: a cell starting with = + - @ tab or CR is a formula to a spreadsheet.
TEST(Csv, FormulaPrefixesAreNeutralised) {
  EXPECT_EQ(csv_field("=HYPERLINK(\"http://x\")"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(csv_field("+1+cmd|' /C calc'!A0"), "\"'+1+cmd|' /C calc'!A0\"");
  EXPECT_EQ(csv_field("-bash"), "\"'-bash\"");
  EXPECT_EQ(csv_field("@SUM(A1)"), "\"'@SUM(A1)\"");
  EXPECT_EQ(csv_field("\t=1"), "\xEF\xBF\xBD=1");
  EXPECT_EQ(csv_field("\r=1"), "\xEF\xBF\xBD=1");
  EXPECT_EQ(csv_field("python -m x=1"), "python -m x=1");  // only the first character counts
}

TEST(Csv, ProcessRowsCarryTheCleanCommand) {
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[0].command = "=cmd\x1B[2J";
  const std::string rows = csv_rows(s, CsvRows::Processes);
  EXPECT_EQ(rows.find('\x1B'), std::string::npos) << rows;
  EXPECT_NE(rows.find("\"'=cmd\xEF\xBF\xBD[2J\""), std::string::npos) << rows;
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
