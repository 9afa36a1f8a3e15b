// tests/cpp/format/test_recording_v4.cpp -- the checked-in v4 recording (driver breakdowns)
//
// tests/data/recordings/v4_small.vsrec was written by format version 4 from the frozen samples of
// v4_small_fixture.hpp, one chunk per fixture chunk: the v2 samples, then allocators that carry
// the agent's settled driver breakdown (every part; no optional part and an excess; none).
// Later versions must keep reading it to exactly those samples.
#include <gtest/gtest.h>

#include "format/fixtures.hpp"
#include "format/temp_dir.hpp"
#include "format/test_data.hpp"
#include "format/v4_small_fixture.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"

namespace vramscope {
namespace {

std::string v4_small_path() { return testing::test_data_path("recordings/v4_small.vsrec"); }

TEST(RecordingV4, ReadsTheCheckedInFile) {
  auto reader = RecordingReader::open(v4_small_path());
  const RecordingMetadata& metadata = reader->metadata();
  const RecordingMetadata expected = testing::v4_small_metadata();
  EXPECT_EQ(metadata.format_version, 4);
  EXPECT_EQ(metadata.created_ns, expected.created_ns);
  EXPECT_EQ(metadata.writer_version, expected.writer_version);
  SystemSample sample;
  uint64_t breakdowns = 0;
  for (const auto& chunk : testing::v4_small_chunks()) {
    for (const auto& want : chunk) {
      ASSERT_TRUE(reader->next(sample)) << reader->tail_message();
      EXPECT_EQ(sample, want);
      for (const AllocatorSample& a : sample.allocators) breakdowns += a.breakdown ? 1 : 0;
    }
  }
  EXPECT_EQ(breakdowns, 4U) << "the last chunk's two samples carry two breakdowns each";
  EXPECT_FALSE(reader->next(sample));
  EXPECT_EQ(reader->tail_state(), TailState::Clean) << reader->tail_message();
}

TEST(RecordingV4, CurrentWriterStillProducesTheSameBytes) {
  // Only meaningful while version 4 is the current format (see test_recording_v3.cpp on zstd).
  if (format::recording_version != 4) GTEST_SKIP() << "the writer has moved on to a newer format";
  testing::TempDir dir;
  const std::string path = dir.file("again.vsrec");
  auto writer = RecordingWriter::create(path, testing::v4_small_metadata());
  for (const auto& chunk : testing::v4_small_chunks()) {
    for (const auto& sample : chunk) writer->append(sample);
    writer->flush();
  }
  writer->close();
  EXPECT_EQ(testing::read_file(path), testing::read_file(v4_small_path()));
}

TEST(RecordingV4, OlderFilesReadWithoutBreakdowns) {
  // Versions 1 to 3 have no breakdown field: their allocators read as "no settled pairing",
  // never as a breakdown left over from the sample the decoder reused.
  for (const char* name : {"v1_small.vsrec", "v2_small.vsrec", "v3_small.vsrec"}) {
    auto reader = RecordingReader::open(testing::test_data_path(std::string("recordings/") + name));
    SystemSample sample;
    uint64_t allocators = 0;
    while (reader->next(sample)) {
      for (const AllocatorSample& a : sample.allocators) {
        ++allocators;
        EXPECT_FALSE(a.breakdown.has_value()) << name;
      }
    }
    EXPECT_EQ(reader->tail_state(), TailState::Clean) << name << ": " << reader->tail_message();
    EXPECT_GT(allocators, 0U) << name;
    EXPECT_LT(reader->metadata().format_version, 4) << name;
  }
}

TEST(RecordingBundled, TheShippedH200RecordingCarriesTheAgentsSettledPairings) {
  // data/h200-training.vsrec (tools/main.sh replays it): examples/train_small_gpt.py recorded by
  // `vramscope run --record --interval 100ms` on an H200 in format 4.
  const std::string path = std::string(VRAMSCOPE_BUNDLED_DATA_DIR) + "/h200-training.vsrec";
  auto reader = RecordingReader::open(path);
  EXPECT_EQ(reader->metadata().format_version, 4);
  SystemSample sample;
  uint64_t samples = 0;
  uint64_t steps = 0;
  uint64_t agents = 0;
  uint64_t paired = 0;
  while (reader->next(sample)) {
    ++samples;
    steps += sample.steps.size();
    for (const AllocatorSample& a : sample.allocators) {
      ++agents;
      paired += a.breakdown ? 1 : 0;
    }
  }
  EXPECT_EQ(reader->tail_state(), TailState::Clean) << reader->tail_message();
  EXPECT_GT(samples, 10U);
  EXPECT_GT(steps, 0U) << "it was recorded from a training run with the agent";
  // Every agent record but those before the agent's first settled pairing (CUDA starting up).
  EXPECT_GT(paired, agents * 9 / 10) << paired << " of " << agents;
}

}  // namespace
}  // namespace vramscope
