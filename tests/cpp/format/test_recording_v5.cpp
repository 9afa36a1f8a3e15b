// tests/cpp/format/test_recording_v5.cpp -- the checked-in v5 recording (why a process polls)
//
// tests/data/recordings/v5_small.vsrec was written by format version 5 from the frozen samples of
// v5_small_fixture.hpp, one chunk per fixture chunk: the v4 samples, then allocators of processes
// that poll and say why (with a breakdown and without), one that polls without saying, and one
// with exact numbers. Later versions must keep reading it to exactly those samples.
#include <gtest/gtest.h>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "format/test_data.hpp"
#include "format/v5_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"

namespace vramscope {
namespace {

std::string v5_small_path() { return testing::test_data_path("recordings/v5_small.vsrec"); }

TEST(RecordingV5, ReadsTheCheckedInFile) {
  auto reader = RecordingReader::open(v5_small_path());
  const RecordingMetadata& metadata = reader->metadata();
  const RecordingMetadata expected = testing::v5_small_metadata();
  EXPECT_EQ(metadata.format_version, 5);
  EXPECT_EQ(metadata.created_ns, expected.created_ns);
  EXPECT_EQ(metadata.writer_version, expected.writer_version);
  SystemSample sample;
  uint64_t reasons = 0;
  for (const auto& chunk : testing::v5_small_chunks()) {
    for (const auto& want : chunk) {
      ASSERT_TRUE(reader->next(sample)) << reader->tail_message();
      EXPECT_EQ(sample, want);
      for (const AllocatorSample& a : sample.allocators)
        reasons += a.polling_reason.empty() ? 0 : 1;
    }
  }
  EXPECT_EQ(reasons, 4U) << "the last chunk's two samples carry two reasons each";
  EXPECT_FALSE(reader->next(sample));
  EXPECT_EQ(reader->tail_state(), TailState::Clean) << reader->tail_message();
}

TEST(RecordingV5, CurrentWriterStillProducesTheSameBytes) {
  // Only meaningful while version 5 is the current format (see test_recording_v3.cpp on zstd).
  if (format::recording_version != 5) GTEST_SKIP() << "the writer has moved on to a newer format";
  testing::TempDir dir;
  const std::string path = dir.file("again.vsrec");
  auto writer = RecordingWriter::create(path, testing::v5_small_metadata());
  for (const auto& chunk : testing::v5_small_chunks()) {
    for (const auto& sample : chunk) writer->append(sample);
    writer->flush();
  }
  writer->close();
  EXPECT_EQ(testing::read_file(path), testing::read_file(v5_small_path()));
}

TEST(RecordingV5, OlderFilesReadWithoutReasons) {
  // Versions 1 to 4 have no reason: their polled allocators read as "did not say", never as a
  // reason left over from the sample the decoder reused.
  for (const char* name :
       {"v1_small.vsrec", "v2_small.vsrec", "v3_small.vsrec", "v4_small.vsrec"}) {
    auto reader = RecordingReader::open(testing::test_data_path(std::string("recordings/") + name));
    SystemSample sample;
    uint64_t allocators = 0;
    while (reader->next(sample)) {
      for (const AllocatorSample& a : sample.allocators) {
        ++allocators;
        EXPECT_EQ(a.polling_reason, "") << name;
      }
    }
    EXPECT_EQ(reader->tail_state(), TailState::Clean) << name << ": " << reader->tail_message();
    EXPECT_GT(allocators, 0U) << name;
    EXPECT_LT(reader->metadata().format_version, 5) << name;
  }
}

}  // namespace
}  // namespace vramscope
