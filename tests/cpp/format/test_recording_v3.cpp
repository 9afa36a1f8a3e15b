// tests/cpp/format/test_recording_v3.cpp -- the checked-in v3 (packed) recording
//
// tests/data/recordings/v3_small.vsrec was written by format version 3 (zstd-packed chunks) from
// the frozen samples of v2_small_fixture.hpp, one chunk per fixture chunk. Later versions must
// keep reading it to exactly those samples.
#include <gtest/gtest.h>

#include <cstdlib>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "format/test_data.hpp"
#include "format/v2_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"

namespace vramscope {
namespace {

std::string v3_small_path() { return testing::test_data_path("recordings/v3_small.vsrec"); }

TEST(RecordingV3, ReadsTheCheckedInFile) {
  auto reader = RecordingReader::open(v3_small_path());
  const RecordingMetadata& metadata = reader->metadata();
  const RecordingMetadata expected = testing::v2_small_metadata();
  EXPECT_EQ(metadata.format_version, 3);
  EXPECT_EQ(metadata.created_ns, expected.created_ns);
  EXPECT_EQ(metadata.writer_version, expected.writer_version);
  SystemSample sample;
  for (const auto& chunk : testing::v2_small_chunks()) {
    for (const auto& want : chunk) {
      ASSERT_TRUE(reader->next(sample)) << reader->tail_message();
      EXPECT_EQ(sample, want);
    }
  }
  EXPECT_FALSE(reader->next(sample));
  EXPECT_EQ(reader->tail_state(), TailState::Clean) << reader->tail_message();
}

TEST(RecordingV3, CurrentWriterStillProducesTheSameBytes) {
  // Only meaningful while version 3 was the current format (see test_recording_v2.cpp). zstd's
  // output is stable for a given library version and level; a libzstd upgrade that changed it
  // would show here without being a format change, and the reading test above still holds.
  if (format::recording_version != 3) GTEST_SKIP() << "the writer has moved on to a newer format";
  testing::TempDir dir;
  const std::string path = dir.file("again.vsrec");
  auto writer = RecordingWriter::create(path, testing::v2_small_metadata());
  for (const auto& chunk : testing::v2_small_chunks()) {
    for (const auto& sample : chunk) writer->append(sample);
    writer->flush();
  }
  writer->close();
  EXPECT_EQ(testing::read_file(path), testing::read_file(v3_small_path()));
}

TEST(RecordingV3, EveryOlderCheckedInFileStillReads) {
  for (const char* name : {"v1_small.vsrec", "v2_small.vsrec"}) {
    const std::string path = std::string(VRAMSCOPE_TEST_DATA_DIR) + "/recordings/" + name;
    auto reader = RecordingReader::open(path);
    SystemSample sample;
    uint64_t samples = 0;
    while (reader->next(sample)) ++samples;
    EXPECT_EQ(reader->tail_state(), TailState::Clean) << name << ": " << reader->tail_message();
    EXPECT_GT(samples, 0U) << name;
    EXPECT_LT(reader->metadata().format_version, format::first_packed_version) << name;
  }
}

}  // namespace
}  // namespace vramscope
