// tests/cpp/exporters/test_sink_files.cpp -- export files: planted names, modes, failed exports
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "fixtures.hpp"
#include "temp_dir.hpp"
#include "vramscope/exporters/chrome_trace.hpp"
#include "vramscope/exporters/sink.hpp"
#include "vramscope/report/row_files.hpp"
#include "vramscope/status.hpp"

namespace vramscope::exporters {
namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

mode_t mode_of(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 ? info.st_mode : 0;
}

std::size_t entries_in(const std::string& dir) {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++count;
  return count;
}

TEST(ExportFiles, ForceReplacesAPlantedSymlinkInsteadOfWritingThroughIt) {
  test::TempDir dir;
  const std::string victim = dir.file("victim");
  write_text(victim, "precious");
  const std::string path = dir.file("out.csv");
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);
  {
    report::CsvFileSink sink(path, report::CsvRows::Devices, /*overwrite=*/true);
    sink.write(test::make_rich_sample());
  }
  EXPECT_EQ(test::read_file(victim), "precious");
  EXPECT_TRUE(S_ISREG(mode_of(path)));
  EXPECT_NE(test::read_file(path).find("timestamp"), std::string::npos);
  EXPECT_EQ(entries_in(dir.path()), 2U) << "no temporary file is left behind";
}

TEST(ExportFiles, AnOverwrittenExportIsPrivateWhateverTheOldMode) {
  test::TempDir dir;
  const std::string path = dir.file("samples.jsonl");
  write_text(path, "old\n");
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  {
    report::JsonlFileSink sink(path, /*overwrite=*/true);
    sink.write(test::make_rich_sample());
  }
  EXPECT_EQ(mode_of(path) & 0777, 0600U);
  EXPECT_EQ(test::read_file(path).rfind("{", 0), 0U);
}

TEST(ExportFiles, AFailedExportLeavesNoPartialFileAndKeepsTheOldOne) {
  test::TempDir dir;
  const std::string fresh = dir.file("fresh.csv");
  const std::string kept = dir.file("kept.json");
  write_text(kept, "old trace");
  try {
    report::CsvFileSink csv(fresh, report::CsvRows::Devices, /*overwrite=*/false);
    ChromeTraceOptions options;
    options.overwrite = true;
    ChromeTraceWriter trace(kept, options);
    csv.write(test::make_rich_sample());
    trace.write(test::make_rich_sample());
    csv.flush();
    throw std::runtime_error("the recording turned out corrupt");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(std::filesystem::exists(fresh)) << "a new file of a failed export is removed";
  EXPECT_EQ(test::read_file(kept), "old trace") << "an overwrite that failed changes nothing";
  EXPECT_EQ(entries_in(dir.path()), 1U) << "no temporary file is left behind";
}

TEST(ExportFiles, ANewFileIsNeverCreatedThroughADanglingSymlink) {
  test::TempDir dir;
  const std::string path = dir.file("out.jsonl");
  ASSERT_EQ(::symlink(dir.file("target").c_str(), path.c_str()), 0);
  EXPECT_THROW(report::JsonlFileSink(path, /*overwrite=*/false), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("target")));
}

TEST(ExportFiles, OverwritingADirectoryIsRefused) {
  test::TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("d").c_str(), 0700), 0);
  EXPECT_THROW(BufferedFile(dir.file("d"), /*overwrite=*/true), Error);
}

}  // namespace
}  // namespace vramscope::exporters
