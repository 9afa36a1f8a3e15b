// tests/cpp/view/test_replay.cpp -- replay cursor: stepping, seeking past the window, timed playback
//
// Most tests use an in-memory stand-in for RecordingReader with the same contract (samples in
// order, then false and a tail state) to count reopenings; the last one steps through a real file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "vramscope/status.hpp"
#include "vramscope/view/model.hpp"
#include "vramscope/view/replay.hpp"

namespace vramscope::view {
namespace {

constexpr int64_t ms = 1'000'000;

class MemoryRecording final : public RecordingReader {
 public:
  MemoryRecording(const std::vector<SystemSample>* samples, int* opens, TailState tail)
      : m_samples(samples), m_tail(tail) {
    ++*opens;
    m_metadata.hostname = "node-a";
    m_metadata.created_ns = fixtures::base_ns;
  }
  const RecordingMetadata& metadata() const override { return m_metadata; }
  bool next(SystemSample& out) override {
    if (m_next >= m_samples->size()) return false;
    out = (*m_samples)[m_next++];
    return true;
  }
  TailState tail_state() const override { return m_tail; }
  std::string tail_message() const override {
    return m_tail == TailState::Clean ? "" : "torn chunk at byte 4096";
  }
  /// No index: the cursor reads from the start, as for a format-2 file.
  std::vector<RecordingSegment> segments() override { return {}; }
  void seek(uint64_t /*offset*/) override { throw Error("a memory recording has no index"); }

 private:
  const std::vector<SystemSample>* m_samples;
  TailState m_tail;
  RecordingMetadata m_metadata;
  std::size_t m_next = 0;
};

/// `count` samples 100 ms apart; sample i has timestamp base + i * 100 ms.
std::vector<SystemSample> samples(int count) {
  std::vector<SystemSample> out;
  for (int i = 0; i < count; ++i) {
    SystemSample s = fixtures::one_gpu(i);
    s.timestamp_ns = fixtures::base_ns + i * 100 * ms;
    out.push_back(std::move(s));
  }
  return out;
}

struct Fixture {
  std::vector<SystemSample> data;
  int opens = 0;
  TailState tail = TailState::Clean;
  RecordingOpener opener() {
    return [this] { return std::make_unique<MemoryRecording>(&data, &opens, tail); };
  }
};

int64_t index_of(const ReplayCursor& cursor) {
  return (cursor.current().timestamp_ns - fixtures::base_ns) / (100 * ms);
}

TEST(ReplayPeak, IsTheFirstSampleWithTheMostUsedMemoryOverAllGpus) {
  Fixture f{samples(6)};
  const auto used = [&f](std::size_t i, std::vector<uint64_t> bytes) {
    f.data[i].devices.resize(bytes.size(), f.data[i].devices.front());
    for (std::size_t d = 0; d < bytes.size(); ++d) f.data[i].devices[d].used_bytes = bytes[d];
  };
  for (std::size_t i = 0; i < f.data.size(); ++i) used(i, {1, 1});
  used(2, {5, 1});
  used(3, {1, 7});  // the most in total, on the second GPU
  used(4, {4, 3});  // the same total later: the first one counts
  used(5, {0, 0});  // the run ended: an empty GPU
  auto reader = f.opener()();
  EXPECT_EQ(peak_sample_index(*reader), 3U);
  Fixture none{samples(3)};
  for (SystemSample& s : none.data) {
    for (DeviceSample& d : s.devices) d.used_bytes.reset();
  }
  auto empty = none.opener()();
  EXPECT_EQ(peak_sample_index(*empty), 0U);
}

TEST(ReplayCursor, StepsForwardAndBackAndStopsAtBothEnds) {
  Fixture f{samples(5)};
  ReplayCursor cursor(f.opener());
  EXPECT_EQ(cursor.position(), 0U);
  EXPECT_FALSE(cursor.step_back());
  for (int i = 1; i < 5; ++i) ASSERT_TRUE(cursor.step_forward());
  EXPECT_FALSE(cursor.step_forward());
  EXPECT_TRUE(cursor.at_end());
  EXPECT_EQ(cursor.count(), 5U);
  EXPECT_EQ(index_of(cursor), 4);
  ASSERT_TRUE(cursor.step_back());
  EXPECT_EQ(index_of(cursor), 3);
  EXPECT_EQ(f.opens, 1) << "stepping back inside the window never rereads the file";
}

TEST(ReplayCursor, SeekingBeforeTheWindowRereadsAndKeepsTheWindowBounded) {
  Fixture f{samples(100)};
  ReplayCursor cursor(f.opener(), 10);
  cursor.seek_end();
  EXPECT_EQ(index_of(cursor), 99);
  EXPECT_LE(cursor.recent(1000).size(), 11U) << "only the window is kept in memory";
  cursor.seek(5);
  EXPECT_EQ(index_of(cursor), 5);
  EXPECT_EQ(f.opens, 2);
  ASSERT_TRUE(cursor.step_back());
  EXPECT_EQ(index_of(cursor), 4);
  EXPECT_EQ(f.opens, 2);
  cursor.seek(1000);  // past the end: the last sample
  EXPECT_EQ(index_of(cursor), 99);
  // Going back one sample at a time through the whole file stays exact.
  for (int i = 98; i >= 0; --i) {
    ASSERT_TRUE(cursor.step_back());
    ASSERT_EQ(index_of(cursor), i);
  }
  EXPECT_LE(f.opens, 2 + 100 / 10 + 1) << "each reread refills a whole window";
}

TEST(ReplayCursor, RecentEndsWithTheCurrentSample) {
  Fixture f{samples(20)};
  ReplayCursor cursor(f.opener());
  cursor.seek(7);
  const auto recent = cursor.recent(3);
  ASSERT_EQ(recent.size(), 3U);
  EXPECT_EQ(recent.back(), &cursor.current());
  EXPECT_EQ(recent.front()->timestamp_ns, fixtures::base_ns + 5 * 100 * ms);
}

TEST(ReplayCursor, PlaybackFollowsRecordedTimeTimesSpeed) {
  Fixture f{samples(50)};
  ReplayCursor cursor(f.opener());
  const int64_t t0 = 1'000 * ms;
  cursor.set_playing(true, t0);
  EXPECT_EQ(cursor.next_due_ns(), t0 + 100 * ms);
  EXPECT_EQ(cursor.advance(t0 + 99 * ms), 0U);
  EXPECT_EQ(cursor.advance(t0 + 100 * ms), 1U);
  EXPECT_EQ(cursor.advance(t0 + 450 * ms), 3U);
  EXPECT_EQ(index_of(cursor), 4);
  cursor.set_speed(4.0, t0 + 450 * ms);          // re-anchors at sample 4
  EXPECT_EQ(cursor.advance(t0 + 550 * ms), 4U);  // 100 ms at 4x = 400 ms of recording
  EXPECT_EQ(index_of(cursor), 8);
  cursor.set_playing(false, t0 + 600 * ms);
  EXPECT_EQ(cursor.advance(t0 + 10'000 * ms), 0U);
  EXPECT_FALSE(cursor.next_due_ns().has_value());
}

TEST(ReplayCursor, SpeedIsClampedAndPlaybackStopsAtTheEnd) {
  Fixture f{samples(10)};
  ReplayCursor cursor(f.opener());
  for (int i = 0; i < 20; ++i) cursor.faster(0);
  EXPECT_EQ(cursor.speed(), max_replay_speed);
  for (int i = 0; i < 20; ++i) cursor.slower(0);
  EXPECT_EQ(cursor.speed(), min_replay_speed);
  cursor.set_speed(64.0, 1);
  EXPECT_EQ(cursor.advance(1 + 1'000'000 * ms), 9U);
  EXPECT_TRUE(cursor.at_end());
  EXPECT_FALSE(cursor.playing());
}

TEST(ReplayCursor, ExtremeTimestampsNeitherWrapNorPlayBackwards) {
  // From the ends of the int64 range: the differences overflowed before the fix, and a wrapped
  // due time in the past made playback race through the file.
  Fixture f{samples(3)};
  f.data[0].timestamp_ns = INT64_MIN + 1;
  f.data[1].timestamp_ns = INT64_MAX;
  f.data[2].timestamp_ns = INT64_MAX;
  ReplayCursor cursor(f.opener());
  const int64_t t0 = 1'000 * ms;
  cursor.set_playing(true, t0);
  const std::optional<int64_t> due = cursor.next_due_ns();
  ASSERT_TRUE(due.has_value());
  EXPECT_GT(*due, t0) << "the next sample is due later, not in the wrapped past";
  EXPECT_EQ(cursor.advance(t0 + 1'000 * ms), 0U);
  EXPECT_EQ(cursor.current().timestamp_ns, INT64_MIN + 1);
}

TEST(ReplayCursor, NanSpeedFallsBackToRealTime) {
  Fixture f{samples(10)};
  ReplayCursor cursor(f.opener());
  const int64_t t0 = 1'000 * ms;
  cursor.set_speed(std::nan(""), t0);
  EXPECT_EQ(cursor.speed(), 1.0) << "NaN slips through std::clamp; playback would never advance";
  cursor.set_playing(true, t0);
  EXPECT_EQ(cursor.advance(t0 + 100 * ms), 1U);
}

TEST(ReplayCursor, TornTailIsReportedAndEmptyFilesAreRefused) {
  Fixture torn{samples(3)};
  torn.tail = TailState::Truncated;
  ReplayCursor cursor(torn.opener());
  cursor.seek_end();
  EXPECT_EQ(cursor.tail_message(), "torn chunk at byte 4096");
  Fixture empty;
  EXPECT_THROW(ReplayCursor{empty.opener()}, Error);
}

}  // namespace
}  // namespace vramscope::view

namespace vramscope::view {
namespace {

TEST(ReplayCursor, StepsThroughARealRecordingFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("vramscope_replay_test_" + std::to_string(getpid()) + ".vrec");
  RecordingMetadata metadata;
  metadata.created_ns = fixtures::base_ns;
  metadata.hostname = "node-a";
  metadata.interval_ns = 100 * ms;
  {
    auto writer = RecordingWriter::create(path.string(), metadata, true);
    for (const auto& sample : samples(30)) {
      writer->append(sample);
      writer->flush();  // several chunks, as a long recording has
    }
  }
  ReplayCursor cursor([&] { return RecordingReader::open(path.string()); }, 8);
  EXPECT_EQ(cursor.metadata().hostname, "node-a");
  cursor.seek(20);
  EXPECT_EQ(index_of(cursor), 20);
  EXPECT_EQ(cursor.current().devices.at(0).processes.at(0).command,
            "python train.py --model llama");
  cursor.seek(2);  // before the window: reopens the file
  EXPECT_EQ(index_of(cursor), 2);
  cursor.seek_end();
  EXPECT_EQ(cursor.count(), 30U);
  EXPECT_TRUE(cursor.tail_message().empty());
  std::filesystem::remove(path);
}

TEST(ReplayCursor, SeeksThroughTheIndexWithoutReadingEarlierSegments) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("vramscope_replay_index_" + std::to_string(getpid()) + ".vrec");
  RecordingMetadata metadata;
  metadata.created_ns = fixtures::base_ns;
  metadata.interval_ns = 100 * ms;
  const std::vector<SystemSample> data = samples(600);
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.segment_bytes = 8U << 10U;  // many segments
  {
    auto writer = RecordingWriter::create(path.string(), metadata, options);
    for (const auto& sample : data) {
      writer->append(sample);
      writer->flush();
    }
  }
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::filesystem::remove(path);
  const std::vector<RecordingSegment> segments = RecordingReader::open_bytes(bytes)->segments();
  ASSERT_GE(segments.size(), 4U);
  // Damage a sample chunk of the first segment (its index stays valid): only a cursor that
  // seeks through the index can reach the samples after it.
  std::string damaged = bytes;
  const uint64_t at = (segments[0].offset + segments[0].end_offset) / 2;
  damaged[at] = static_cast<char>(damaged[at] ^ 0x40);
  int opens = 0;
  ReplayCursor cursor(
      [&] {
        ++opens;
        return RecordingReader::open_bytes(damaged);
      },
      8);
  const uint64_t target = 500;
  cursor.seek(target);
  EXPECT_EQ(index_of(cursor), target);
  EXPECT_EQ(cursor.current().timestamp_ns, data[target].timestamp_ns);
  cursor.seek(target - 300);  // before the window: reopened at a segment, not the start
  EXPECT_EQ(index_of(cursor), target - 300);
  EXPECT_EQ(cursor.current().timestamp_ns, data[target - 300].timestamp_ns);
  EXPECT_TRUE(cursor.step_back());
  EXPECT_EQ(cursor.current().timestamp_ns, data[target - 301].timestamp_ns);
  cursor.seek_end();
  EXPECT_EQ(cursor.count(), 600U);
  EXPECT_EQ(cursor.current().timestamp_ns, data.back().timestamp_ns);
  EXPECT_LE(opens, 4);
}

TEST(ReplayCursor, RecordedStepCategoriesReachTheViewModel) {
  // Sample 10 of a real (v2) recording carries a step with a breakdown; the model is fed the way
  // `top --replay` feeds it: every sample stepped over, and a seek rebuilds from the window.
  const auto path = std::filesystem::temp_directory_path() /
                    ("vramscope_replay_categories_" + std::to_string(getpid()) + ".vrec");
  RecordingMetadata metadata;
  metadata.created_ns = fixtures::base_ns;
  metadata.interval_ns = 100 * ms;
  std::vector<SystemSample> data = samples(20);
  const CategoryBytes breakdown{1 * fixtures::gib, 2 * fixtures::gib, 3 * fixtures::gib,
                                4 * fixtures::gib, 5 * fixtures::mib, 6 * fixtures::mib};
  data[10].steps.push_back(fixtures::step(4242, "GPU-00000000", 77, breakdown));
  {
    auto writer = RecordingWriter::create(path.string(), metadata, true);
    for (const auto& sample : data) writer->append(sample);
  }
  ReplayCursor cursor([&] { return RecordingReader::open(path.string()); });
  ViewModel model;
  model.ingest(cursor.current());
  const auto trainer = [&]() -> const ProcessRow& {
    for (const auto& row : model.rows()) {
      if (row.pid == 4242) return row;
    }
    throw std::runtime_error("no trainer row");
  };
  while (cursor.position() < 9) {
    ASSERT_TRUE(cursor.step_forward());
    model.ingest(cursor.current());
  }
  EXPECT_FALSE(trainer().step_categories.has_value());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(cursor.step_forward());
    model.ingest(cursor.current());
  }
  ASSERT_TRUE(trainer().step_categories.has_value()) << "kept after the step's own sample";
  EXPECT_EQ(*trainer().step_categories, breakdown);
  EXPECT_EQ(trainer().categories_step, 77U);
  cursor.seek(5);  // back before the step: what the model knew of later samples goes
  model.clear_history();
  for (const SystemSample* sample : cursor.recent(1024)) model.ingest(*sample);
  EXPECT_FALSE(trainer().step_categories.has_value());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace vramscope::view
