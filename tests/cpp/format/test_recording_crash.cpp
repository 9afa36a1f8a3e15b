// tests/cpp/format/test_recording_crash.cpp -- a recorder killed with SIGKILL loses no flushed chunk, a cut file only its last
//
// A child process records in a loop and reports each completed flush() through a pipe; the parent
// blocks on that pipe (no sleeps) and kills the child once enough chunks are on disk, while it is
// busy writing the next one. Everything reported as flushed must read back.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "build_limits.hpp"
#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

using testing::dump;
using testing::make_sample;

constexpr int samples_per_chunk = 3;

/// The child: records until killed, writing the number of flushed samples after each flush().
[[noreturn]] void record_until_killed(const std::string& path, int report_fd, bool sync) {
  try {
    RecordingWriterOptions options;
    options.sync_each_chunk = sync;
    auto writer = RecordingWriter::create(path, testing::make_metadata(), options);
    for (uint64_t seed = 0;; ++seed) {
      // Big samples make each write() long, so the kill often lands inside one.
      writer->append(make_sample(seed, 8, 64));
      if ((seed + 1) % samples_per_chunk == 0) {
        writer->flush();
        const uint64_t flushed = writer->sample_count();
        if (::write(report_fd, &flushed, sizeof flushed) != sizeof flushed) ::_exit(3);
      }
    }
  } catch (...) {
    ::_exit(2);
  }
}

void kill_after_chunks(int chunks, bool sync) {
  testing::TempDir dir;
  const std::string path = dir.file("killed.vsrec");
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    record_until_killed(path, pipe_fds[1], sync);
  }
  ::close(pipe_fds[1]);
  uint64_t flushed = 0;
  for (int i = 0; i < chunks; ++i) {
    ASSERT_EQ(::read(pipe_fds[0], &flushed, sizeof flushed), static_cast<ssize_t>(sizeof flushed))
        << "recorder died early";
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(pipe_fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;

  auto reader = RecordingReader::open(path);
  SystemSample sample;
  uint64_t count = 0;
  while (reader->next(sample)) {
    ASSERT_EQ(sample, make_sample(count, 8, 64)) << "sample " << count;
    ++count;
  }
  EXPECT_GE(count, flushed);
  EXPECT_EQ(count % samples_per_chunk, 0U) << "only whole chunks may be read";
  EXPECT_NE(reader->tail_state(), TailState::Corrupt) << reader->tail_message();
}

TEST(RecordingCrash, SigkillKeepsEveryFlushedChunk) {
  for (int chunks : {1, 2, 5, 13, 40}) {
    SCOPED_TRACE(chunks);
    kill_after_chunks(chunks, /*sync=*/false);
  }
}

TEST(RecordingCrash, SigkillWithSyncEachChunk) { kill_after_chunks(4, /*sync=*/true); }

TEST(RecordingCrash, ACutAnywhereInPackedChunksLosesAtMostTheChunkBeingWritten) {
  VRAMSCOPE_SKIP_SINGLE_THREADED_SWEEP_UNDER_TSAN();
  // Samples 100 ms apart, packed as `vramscope record` packs them: a chunk is closed before a
  // sample that would come a second (record_chunk_window_ns) or more after its first, so ten
  // samples make a chunk. Small segments put index and key chunks in the file too. A crash
  // leaves the file cut at some byte: whatever the byte, what reads back must be exactly the
  // samples of the chunks wholly before it, and nothing after, a prefix of what was written.
  testing::TempDir dir;
  const std::string path = dir.file("packed.vsrec");
  RecordingWriterOptions options;
  options.sync_each_chunk = false;
  options.segment_bytes = 4096;
  auto writer = RecordingWriter::create(path, testing::make_metadata(), options);
  const uint64_t header_bytes = writer->file_bytes();
  std::vector<SystemSample> written;
  /// File size after each chunk, and the samples on disk then.
  std::vector<std::pair<uint64_t, std::size_t>> flushed;
  std::optional<int64_t> chunk_first_ns;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    written.push_back(make_sample(seed, 2, 4));
    if (!chunk_first_ns) chunk_first_ns = written.back().timestamp_ns;
    writer->append(written.back());
    const int64_t next_ns = make_sample(seed + 1, 2, 4).timestamp_ns;
    if (next_ns - *chunk_first_ns >= record_chunk_window_ns) {
      writer->flush();
      flushed.emplace_back(writer->file_bytes(), written.size());
      chunk_first_ns.reset();
    }
  }
  writer->flush();
  flushed.emplace_back(writer->file_bytes(), written.size());
  const uint64_t samples_end = writer->file_bytes();
  writer->close();
  ASSERT_EQ(flushed.front().second, 10U) << "a chunk per second of samples";
  std::string bytes = testing::read_file(path);
  bytes.resize(samples_end);  // the closing index chunk, as a killed recorder leaves none
  ASSERT_GT(flushed.size(), 6U);
  for (uint64_t size = header_bytes; size <= bytes.size(); ++size) {
    std::size_t whole = 0;
    for (const auto& [end, count] : flushed) {
      if (end <= size) whole = count;
    }
    const auto reader = RecordingReader::open_bytes(bytes.substr(0, size));
    std::size_t count = 0;
    for (SystemSample sample; reader->next(sample); ++count) {
      ASSERT_LT(count, written.size());
      ASSERT_EQ(sample, written[count]) << "sample " << count << ", cut at " << size;
    }
    EXPECT_EQ(count, whole) << "cut at " << size;
    EXPECT_NE(reader->tail_state(), TailState::Corrupt)
        << "cut at " << size << ": " << reader->tail_message();
  }
}

}  // namespace
}  // namespace vramscope
