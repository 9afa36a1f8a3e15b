// tests/cpp/format/test_recording_v1.cpp -- the checked-in v1 recording must always read back
//
// tests/data/recordings/v1_small.vsrec was written by format version 1. Later versions must keep
// reading it to exactly the frozen samples in v1_small_fixture.hpp.
#include <gtest/gtest.h>

#include <cstdlib>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "format/test_data.hpp"
#include "format/v1_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"

namespace vramscope {
namespace {

std::string v1_small_path() { return testing::test_data_path("recordings/v1_small.vsrec"); }

TEST(RecordingV1, ReadsTheCheckedInFile) {
  auto reader = RecordingReader::open(v1_small_path());
  const RecordingMetadata& metadata = reader->metadata();
  const RecordingMetadata expected = testing::v1_small_metadata();
  EXPECT_EQ(metadata.format_version, 1);
  EXPECT_EQ(metadata.created_ns, expected.created_ns);
  EXPECT_EQ(metadata.interval_ns, expected.interval_ns);
  EXPECT_EQ(metadata.hostname, expected.hostname);
  EXPECT_EQ(metadata.driver_version, expected.driver_version);
  EXPECT_EQ(metadata.command, expected.command);
  EXPECT_EQ(metadata.writer_version, expected.writer_version);
  SystemSample sample;
  for (const auto& chunk : testing::v1_small_chunks()) {
    for (const auto& want : chunk) {
      ASSERT_TRUE(reader->next(sample)) << reader->tail_message();
      EXPECT_EQ(sample, want);
    }
  }
  EXPECT_FALSE(reader->next(sample));
  EXPECT_EQ(reader->tail_state(), TailState::Clean);
}

TEST(RecordingV1, CurrentWriterStillProducesTheSameBytes) {
  // Only meaningful while version 1 is the current format: then the encoder must be byte-stable,
  // which catches accidental format changes that forgot to bump the version.
  if (format::recording_version != 1) GTEST_SKIP() << "the writer has moved on to a newer format";
  testing::TempDir dir;
  const std::string path = dir.file("again.vsrec");
  auto writer = RecordingWriter::create(path, testing::v1_small_metadata());
  for (const auto& chunk : testing::v1_small_chunks()) {
    for (const auto& sample : chunk) writer->append(sample);
    writer->flush();
  }
  writer->close();
  EXPECT_EQ(testing::read_file(path), testing::read_file(v1_small_path()));
}

}  // namespace
}  // namespace vramscope
