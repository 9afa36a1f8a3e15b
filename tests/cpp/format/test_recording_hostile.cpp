// tests/cpp/format/test_recording_hostile.cpp -- recordings that are not files, copied chunks,
// and names planted to redirect a writer
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

using testing::make_metadata;
using testing::make_sample;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

/// The error RecordingReader::open(path) throws; fails the test when it throws none.
Error open_error(const std::string& path) {
  try {
    RecordingReader::open(path);
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << path << " opened as a recording";
  return Error("");
}

TEST(HostileRecording, AFifoIsRefusedWithoutWaitingForAWriter) {
  TempDir dir;
  const std::string fifo = dir.file("run.vsrec");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Before the fix open() waited for a writer forever: the alarm turns that into a failure.
  EXPECT_EXIT(
      {
        ::alarm(10);
        try {
          RecordingReader::open(fifo);
        } catch (const Error& error) {
          const bool clear = std::string(error.what()).find("a FIFO") != std::string::npos &&
                             error.exit_code() == ExitError;
          ::_exit(clear ? 0 : 1);
        }
        ::_exit(2);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(HostileRecording, PathsThatNameNoRegularFileFailTheSameWay) {
  TempDir dir;
  const std::string loop = dir.file("loop.vsrec");
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  ASSERT_EQ(::mkdir(dir.file("dir.vsrec").c_str(), 0700), 0);
  for (const std::string& path : {dir.file("missing.vsrec"), dir.file("dir.vsrec"), loop,
                                  std::string("/dev/zero"), std::string("/dev/null")}) {
    const Error error = open_error(path);
    EXPECT_EQ(error.exit_code(), ExitError) << path << ": " << error.what();
    EXPECT_EQ(std::string(error.what()).find("empty file"), std::string::npos)
        << "a device is not an empty recording: " << error.what();
  }
  EXPECT_NE(std::string(open_error("/dev/zero").what()).find("a character device"),
            std::string::npos);
  EXPECT_NE(std::string(open_error(dir.file("dir.vsrec")).what()).find("a directory"),
            std::string::npos);
  // A regular file that is not a recording is a different failure.
  write_file(dir.file("notes.txt"), "hello");
  EXPECT_EQ(open_error(dir.file("notes.txt")).exit_code(), ExitError);
}

TEST(HostileRecording, AChunkAppendedAgainIsCorruptNotOldSamplesReplayed) {
  TempDir dir;
  const std::string path = dir.file("rec.vsrec");
  uint64_t first_chunk = 0;
  uint64_t last_chunk = 0;
  {
    RecordingWriterOptions options;
    options.sync_each_chunk = false;
    auto writer = RecordingWriter::create(path, make_metadata(), options);
    first_chunk = writer->file_bytes();
    for (uint64_t c = 0; c < 3; ++c) {
      last_chunk = writer->file_bytes();
      writer->append(make_sample(c));
      writer->flush();
    }
  }
  const std::string bytes = read_file(path);
  // Every copy carries valid checksums: only the repetition gives it away. Format 3: the whole
  // body copied starts with a second copy of the self-contained key chunk; a copy of the last
  // chunk (and the index chunk after it) follows an index chunk where a key chunk must come.
  for (const auto& [copied, message] :
       {std::pair{bytes.substr(first_chunk),
                  "repeats the chunk at byte " + std::to_string(first_chunk)},
        std::pair{bytes.substr(last_chunk),
                  std::string("segment does not start with a key chunk")}}) {
    std::string doctored = bytes;
    for (int i = 0; i < 50; ++i) doctored += copied;
    auto reader = RecordingReader::open_bytes(doctored);
    SystemSample sample;
    uint64_t count = 0;
    while (reader->next(sample)) ++count;
    EXPECT_EQ(count, 3U) << "each recorded sample once";
    EXPECT_EQ(reader->tail_state(), TailState::Corrupt);
    EXPECT_NE(reader->tail_message().find(message), std::string::npos) << reader->tail_message();
  }
}

TEST(HostileRecording, OverwriteReplacesAPlantedSymlinkInsteadOfFollowingIt) {
  TempDir dir;
  const std::string victim = dir.file("victim");
  write_file(victim, "precious");
  ASSERT_EQ(::chmod(victim.c_str(), 0644), 0);
  const std::string path = dir.file("run.vsrec");
  ASSERT_EQ(::symlink(victim.c_str(), path.c_str()), 0);

  auto writer = RecordingWriter::create(path, make_metadata(), /*overwrite=*/true);
  writer->append(make_sample(1));
  writer->close();
  EXPECT_EQ(read_file(victim), "precious") << "the symlink's target is untouched";
  struct stat info {};
  ASSERT_EQ(::lstat(path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISREG(info.st_mode)) << "the symlink itself was replaced";
  EXPECT_EQ(info.st_mode & 0777, 0600U);
  auto reader = RecordingReader::open(path);
  SystemSample sample;
  EXPECT_TRUE(reader->next(sample));

  // Without overwrite a symlink (even a dangling one) is an existing name, never followed.
  const std::string dangling = dir.file("dangling.vsrec");
  ASSERT_EQ(::symlink(dir.file("nowhere").c_str(), dangling.c_str()), 0);
  EXPECT_THROW(RecordingWriter::create(dangling, make_metadata()), Error);
  EXPECT_FALSE(::access(dir.file("nowhere").c_str(), F_OK) == 0) << "nothing created through it";
  // No temporary file is left behind.
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.file(""))) {
    ++entries;
  }
  EXPECT_EQ(entries, 3) << "victim, run.vsrec, dangling.vsrec";
}

}  // namespace
}  // namespace vramscope
