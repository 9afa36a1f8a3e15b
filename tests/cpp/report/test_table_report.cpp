// tests/cpp/report/test_table_report.cpp -- the one-shot table: goldens, 80 columns, colour, N/A, lost GPUs
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <sstream>

#include "golden.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/report/table_report.hpp"
#include "vramscope/report/text_cells.hpp"

namespace vramscope::report {
namespace {

using testing::make_allocator;
using testing::make_device;
using testing::make_process;
using testing::make_two_gpu_sample;
using testing::mib;

class Table : public ::testing::Test {
 protected:
  // The header prints local time: pin the zone so goldens do not depend on the machine.
  void SetUp() override {
    setenv("TZ", "UTC", 1);
    tzset();
  }
};

/// Every line of `text` (colour stripped) is at most `width` columns.
void expect_fits(const std::string& text, std::size_t width) {
  std::istringstream lines(strip_ansi(text));
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_LE(display_width(line), width) << "line too wide: [" << line << "]";
  }
}

TEST_F(Table, TwoGpusWithAgentMatchesGolden) {
  const std::string table = format_sample_table(make_two_gpu_sample(), {});
  testing::expect_golden("report/two_gpus_table.txt", table);
  expect_fits(table, 80);
}

TEST_F(Table, HumanUnitsMatchesGolden) {
  TableOptions options;
  options.units = UnitStyle::Human;
  testing::expect_golden("report/two_gpus_table_human.txt",
                         format_sample_table(make_two_gpu_sample(), options));
}

TEST_F(Table, MibIsRoundedUpLikeNvidiaSmi) {
  EXPECT_EQ(format_amount(40960 * mib + mib - 1, UnitStyle::Mib), "40961MiB");
  EXPECT_EQ(format_amount(40960 * mib, UnitStyle::Mib), "40960MiB");
  EXPECT_EQ(format_amount(0, UnitStyle::Mib), "0MiB");
  EXPECT_EQ(format_amount(std::nullopt, UnitStyle::Mib), "N/A");
  EXPECT_EQ(format_amount(std::nullopt, UnitStyle::Human), "N/A");
}

TEST_F(Table, UnsupportedFieldsShowNotAvailableNotZero) {
  SystemSample s = make_two_gpu_sample();
  s.devices[1].reserved_bytes.reset();
  s.devices[1].used_bytes.reset();
  s.devices[0].processes[1].used_bytes.reset();
  const std::string table = format_sample_table(s, {});
  testing::expect_golden("report/unsupported_table.txt", table);
  EXPECT_EQ(table.find("  0MiB"), std::string::npos);
}

TEST_F(Table, LostGpuSaysSoAndOthersStay) {
  SystemSample s = make_two_gpu_sample();
  s.devices[1].lost = true;
  s.devices[1].error = "GPU is lost (NVML error 15)";
  s.devices[1].total_bytes.reset();
  const std::string table = format_sample_table(s, {});
  testing::expect_golden("report/lost_gpu_table.txt", table);
  EXPECT_NE(table.find("GPU lost\n     GPU is lost (NVML error 15)\n"), std::string::npos);
  EXPECT_NE(table.find("NVIDIA H200"), std::string::npos);
}

TEST_F(Table, HiddenProcessesAndContainerAgentsAreExplained) {
  SystemSample s;
  s.timestamp_ns = 1'700'000'000'000'000'000;
  s.hostname = "pod-1";
  s.driver_version = "580.95.05";
  s.devices.push_back(make_device(0));
  s.devices[0].processes.push_back(make_process(31337, 6000, false));
  s.allocators.push_back(make_allocator(7, s.devices[0], 3000, 4000));
  const std::string table = format_sample_table(s, {});
  testing::expect_golden("report/container_table.txt", table);
  EXPECT_NE(table.find("(not visible here: other pid namespace)"), std::string::npos);
  EXPECT_NE(table.find("pid not in driver list (container?)"), std::string::npos);
  EXPECT_NE(table.find("Hint: NVML reports host pids"), std::string::npos);
  expect_fits(table, 80);
}

TEST_F(Table, FitsEightyColumnsOverASweepOfNamesAndProcessCounts) {
  const std::string long_name = "NVIDIA RTX 6000 Ada Generation With A Very Long Marketing Name";
  const std::string long_command(300, 'x');
  for (std::size_t name_length : {0U, 5U, 25U, 26U, 61U}) {
    for (int processes : {0, 1, 3, 40}) {
      for (bool with_agent : {false, true}) {
        for (UnitStyle units : {UnitStyle::Mib, UnitStyle::Human}) {
          SystemSample s = make_two_gpu_sample();
          s.hostname = std::string(120, 'h');
          s.devices[0].name = long_name.substr(0, name_length);
          s.devices[0].processes.clear();
          for (int i = 0; i < processes; ++i) {
            s.devices[0].processes.push_back(make_process(4'194'303U - static_cast<uint32_t>(i),
                                                          143771, i % 2 == 0, long_command));
            s.devices[0].processes.back().user = "a-very-long-user-name";
            s.devices[0].processes.back().kinds = ProcessKindCompute | ProcessKindGraphics;
          }
          s.allocators.clear();
          if (with_agent) s.allocators.push_back(make_allocator(7, s.devices[0], 143000, 143771));
          TableOptions options;
          options.units = units;
          expect_fits(format_sample_table(s, options), 80);
        }
      }
    }
  }
}

TEST_F(Table, WiderTerminalGivesTheCommandMoreRoom) {
  SystemSample s = make_two_gpu_sample();
  const std::string command = "python train.py " + std::string(100, 'a');
  s.devices[0].processes[0].command = command;
  TableOptions wide;
  wide.width_columns = 200;
  EXPECT_NE(format_sample_table(s, wide).find(command), std::string::npos);
  EXPECT_EQ(format_sample_table(s, {}).find(command), std::string::npos);
}

TEST_F(Table, ColourOnlyWhenAskedAndNeverChangesTheLayout) {
  const SystemSample s = make_two_gpu_sample();
  TableOptions coloured;
  coloured.color = true;
  const std::string plain = format_sample_table(s, {});
  const std::string colour = format_sample_table(s, coloured);
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
  EXPECT_NE(colour.find("\x1b["), std::string::npos);
  EXPECT_EQ(strip_ansi(colour), plain);
}

/// make_two_gpu_sample() whose trainer polls (the Python fallback: no driver pairing either).
SystemSample polling_sample(const std::string& reason) {
  SystemSample s = make_two_gpu_sample();
  s.allocators[0].breakdown.reset();
  s.allocators[0].polling_only = true;
  s.allocators[0].polling_reason = reason;
  return s;
}

TEST_F(Table, PollingProcessIsMarkedAndItsReasonWrappedWithItsFix) {
  const std::string table = format_sample_table(
      polling_sample("no C++ compiler (c++, g++ or clang++; or $CXX) to build the agent for "
                     "torch 2.11.0+cu130, which this vramscope carries none for; install one "
                     "(Debian/Ubuntu: apt install g++; Fedora/RHEL: dnf install gcc-c++)"),
      {});
  testing::expect_golden("report/polling_table.txt", table);
  expect_fits(table, 80);
  EXPECT_NE(table.find("torch (polled): alloc 20480MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("dnf install gcc-c++)\n"), std::string::npos) << "the fix is never cut";
}

TEST_F(Table, PollingWithoutAReasonAndOnAnUnknownDeviceIsStillSaid) {
  SystemSample s = polling_sample("");
  s.allocators[0].device_uuid = "GPU-not-listed";
  const std::string table = format_sample_table(s, {});
  EXPECT_NE(table.find("resv 24576MiB  (polled)"), std::string::npos) << table;
  EXPECT_NE(table.find("pid 4021: polling mode, peaks sampled (the highest its polls saw, not "
                       "exact)\n"),
            std::string::npos)
      << table;
}

TEST_F(Table, ControlCharactersInAPollingReasonAreNeutralised) {
  const std::string table = format_sample_table(polling_sample("evil\x1b]0;pwned\x07\nfix"), {});
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_NE(table.find("evil?]0;pwned??fix"), std::string::npos) << table;
}

TEST_F(Table, ControlCharactersFromCommandLinesAreNeutralised) {
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[0].command = "evil\x1b]0;pwned\x07\nnext";
  const std::string table = format_sample_table(s, {});
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_NE(table.find("evil?]0;pwned??next"), std::string::npos);
}

}  // namespace
}  // namespace vramscope::report
