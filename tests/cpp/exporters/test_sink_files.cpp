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

/// The message of the Error that make_private_directories(`dir`) throws ("" when it succeeds).
std::string private_directories_error(const std::string& dir) {
  try {
    make_private_directories(dir);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// `export --tensorboard DIR` wrote through a symlink planted at DIR.
TEST(PrivateDirectories, ASymlinkAsTheDirectoryIsRefused) {
  test::TempDir dir;
  ASSERT_EQ(::mkdir(dir.file("elsewhere").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(dir.file("elsewhere").c_str(), dir.file("run").c_str()), 0);
  const std::string error = private_directories_error(dir.file("run"));
  EXPECT_NE(error.find("is a symlink"), std::string::npos) << error;
  ASSERT_EQ(::symlink(dir.file("nowhere").c_str(), dir.file("dangling").c_str()), 0);
  EXPECT_NE(private_directories_error(dir.file("dangling/run")), "");
  EXPECT_NE(::access(dir.file("nowhere").c_str(), F_OK), 0) << "created through a dangling link";
}

TEST(PrivateDirectories, OursAreCreatedPrivateAndReused) {
  test::TempDir dir;
  EXPECT_EQ(private_directories_error(dir.file("a/b/c")), "");
  EXPECT_EQ(mode_of(dir.file("a/b")) & 07777U, 0700U);
  EXPECT_EQ(private_directories_error(dir.file("a/b/c")), "") << "an existing one of ours";
  EXPECT_EQ(private_directories_error(dir.file("a//b/./c/")), "");
  // A link of our own on the way is fine (a home directory that is a symlink, say).
  ASSERT_EQ(::symlink(dir.file("a").c_str(), dir.file("link").c_str()), 0);
  EXPECT_EQ(private_directories_error(dir.file("link/b/c")), "");
}

TEST(PrivateDirectories, ADirectoryOthersCanWriteIsRefused) {
  test::TempDir dir;
  for (const mode_t mode : {0777U, 0770U, 0775U, 01777U}) {
    const std::string run = dir.file("run" + std::to_string(mode));
    ASSERT_EQ(::mkdir(run.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(run.c_str(), mode), 0);
    const std::string error = private_directories_error(run);
    EXPECT_NE(error.find("other users can write in it"), std::string::npos)
        << mode << ": " << error;
    // As a parent, only the sticky bit (like /tmp) makes a shared directory safe to walk.
    const std::string below = private_directories_error(run + "/mine");
    EXPECT_EQ(below.empty(), (mode & S_ISVTX) != 0) << mode << ": " << below;
  }
}

// Another user's directory (made first, in a shared place) or link: they could swap or read
// what we write. Needs root to make something of another user's.
TEST(PrivateDirectories, AnotherUsersDirectoryOrLinkIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown to another user";
  test::TempDir dir;
  for (const mode_t mode : {01777U, 0755U, 0700U}) {
    const std::string theirs = dir.file("theirs" + std::to_string(mode));
    ASSERT_EQ(::mkdir(theirs.c_str(), mode), 0);
    ASSERT_EQ(::chmod(theirs.c_str(), mode), 0);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    const std::string error = private_directories_error(theirs);
    EXPECT_NE(error.find("belongs to another user (uid 65534)"), std::string::npos) << error;
    EXPECT_NE(private_directories_error(theirs + "/run").find("another user"), std::string::npos);
  }
  ASSERT_EQ(::mkdir(dir.file("target").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(dir.file("target").c_str(), dir.file("planted").c_str()), 0);
  ASSERT_EQ(::lchown(dir.file("planted").c_str(), 65534, 65534), 0);
  const std::string error = private_directories_error(dir.file("planted/run"));
  EXPECT_NE(error.find("symlink of another user"), std::string::npos) << error;
  EXPECT_NE(::access(dir.file("target/run").c_str(), F_OK), 0);
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
