// tests/cpp/format/test_recording_v2.cpp -- the checked-in v2 recording, and every older file we ship
//
// tests/data/recordings/v2_small.vsrec was written by format version 2 (step records with
// per-category bytes). Later versions must keep reading it to exactly the frozen samples in
// v2_small_fixture.hpp.
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

std::string v2_small_path() { return testing::test_data_path("recordings/v2_small.vsrec"); }

TEST(RecordingV2, ReadsTheCheckedInFile) {
  auto reader = RecordingReader::open(v2_small_path());
  const RecordingMetadata& metadata = reader->metadata();
  const RecordingMetadata expected = testing::v2_small_metadata();
  EXPECT_EQ(metadata.format_version, 2);
  EXPECT_EQ(metadata.created_ns, expected.created_ns);
  EXPECT_EQ(metadata.writer_version, expected.writer_version);
  SystemSample sample;
  std::size_t with_categories = 0;
  for (const auto& chunk : testing::v2_small_chunks()) {
    for (const auto& want : chunk) {
      ASSERT_TRUE(reader->next(sample)) << reader->tail_message();
      EXPECT_EQ(sample, want);
      for (const StepRecord& step : sample.steps) with_categories += step.category_bytes ? 1 : 0;
    }
  }
  EXPECT_FALSE(reader->next(sample));
  EXPECT_EQ(reader->tail_state(), TailState::Clean);
  EXPECT_EQ(with_categories, 1U) << "the file holds one step with categories";
}

TEST(RecordingV2, CurrentWriterStillProducesTheSameBytes) {
  // Only meaningful while version 2 is the current format: then the encoder must be byte-stable,
  // which catches format changes that forgot to bump the version.
  if (format::recording_version != 2) GTEST_SKIP() << "the writer has moved on to a newer format";
  testing::TempDir dir;
  const std::string path = dir.file("again.vsrec");
  auto writer = RecordingWriter::create(path, testing::v2_small_metadata());
  for (const auto& chunk : testing::v2_small_chunks()) {
    for (const auto& sample : chunk) writer->append(sample);
    writer->flush();
  }
  writer->close();
  EXPECT_EQ(testing::read_file(path), testing::read_file(v2_small_path()));
}

TEST(RecordingV2, TruncatedCategoryStepIsReportedNotMisread) {
  // Cutting the file inside the last chunk (the one with categories) keeps every chunk before it.
  const std::string bytes = testing::read_file(v2_small_path());
  auto reader = RecordingReader::open_bytes(bytes.substr(0, bytes.size() - 7), "cut.vsrec");
  SystemSample sample;
  std::size_t samples = 0;
  while (reader->next(sample)) {
    ++samples;
    for (const StepRecord& step : sample.steps) EXPECT_FALSE(step.category_bytes.has_value());
  }
  std::size_t before_last_chunk = 0;
  const auto chunks = testing::v2_small_chunks();
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) before_last_chunk += chunks[i].size();
  EXPECT_EQ(samples, before_last_chunk);
  EXPECT_EQ(reader->tail_state(), TailState::Truncated) << reader->tail_message();
}

}  // namespace
}  // namespace vramscope
