// tests/cpp/report/test_summary_digest.cpp -- `show` through the index equals `show` of every sample
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "report/sample_fixtures.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/recording_summary.hpp"

namespace vramscope::report {
namespace {

using testing::mib;

/// A private scratch file, removed at the end.
class ScratchFile {
 public:
  ScratchFile() {
    std::string pattern = (std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp");
    pattern += "/vramscope-digest-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd >= 0) ::close(fd);
    m_path = pattern;
  }
  ~ScratchFile() { ::unlink(m_path.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

/// A varied run: peaks in different segments (and ties, where the earliest must win), a process
/// that appears late, a command that changes, steps with categories, OOMs.
std::vector<SystemSample> varied_run(std::size_t count) {
  std::vector<SystemSample> out;
  SystemSample s = testing::make_two_gpu_sample();
  for (std::size_t i = 0; i < count; ++i) {
    s.timestamp_ns += 100'000'000;
    const uint64_t wave = (i * 37) % 500;
    *s.devices[0].used_bytes = (30000 + wave + (i == 777 ? 9000 : 0)) * mib;
    *s.devices[1].used_bytes = (1000 + (i / 300) % 2 * 500) * mib;  // ties across segments
    *s.devices[0].processes[0].used_bytes = (20000 + wave) * mib;
    AllocatorSample& a = s.allocators[0];
    a.allocated_bytes = (15000 + wave) * mib;
    a.peak_allocated_bytes = std::max(a.peak_allocated_bytes, a.allocated_bytes);
    a.step = i / 10;
    a.step_peak_allocated_bytes = (16000 + (i / 10) % 13 * 7) * mib;
    a.updated_ns = s.timestamp_ns;
    s.steps.clear();
    s.ooms.clear();
    if (i % 10 == 9) {
      StepRecord step;
      step.pid = 4021;
      step.device_uuid = s.devices[0].uuid;
      step.step = i / 10 + 1;
      step.end_ns = s.timestamp_ns;
      step.peak_allocated_bytes = a.step_peak_allocated_bytes;
      step.peak_requested_bytes = (17000 + (i * 13) % 900) * mib;
      step.category_bytes = CategoryBytes{i, 2 * i, 3 * i, 4 * i, 5 * i, 6 * i};
      s.steps.push_back(step);
    }
    if (i % 400 == 123) {
      OomRecord oom;
      oom.pid = 4021;
      oom.device_uuid = s.devices[0].uuid;
      oom.timestamp_ns = s.timestamp_ns;
      s.ooms.push_back(oom);
    }
    if (i == count / 2) {
      s.devices[1].processes.push_back(testing::make_process(6000, 300, true, "late.py"));
    }
    if (i == count / 3) s.devices[0].processes[0].command = "python train.py --resume";
    out.push_back(s);
  }
  return out;
}

std::string summary_json(const std::string& path, bool use_index, std::size_t* indexed) {
  auto reader = RecordingReader::open(path);
  RecordingTail tail;
  const RecordingSummary summary = summarise_recording(*reader, use_index, tail, indexed);
  return format_summary_json("x.vsrec", reader->metadata(), summary, tail);
}

TEST(SummaryDigest, ShowThroughTheIndexEqualsReadingEverySample) {
  ScratchFile file;
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.segment_bytes = 16U << 10U;  // many segments
  options.digest = std::make_shared<SummaryDigest>();
  RecordingMetadata metadata;
  metadata.hostname = "node-7";
  auto writer = RecordingWriter::create(file.path(), metadata, options);
  for (const SystemSample& s : varied_run(3000)) {
    writer->append(s);
    writer->flush();
  }
  writer->close();

  std::size_t indexed = 0;
  const std::string through_index = summary_json(file.path(), true, &indexed);
  EXPECT_GT(indexed, 10U) << "the index was not used";
  std::size_t scanned_indexed = 1;
  const std::string scanned = summary_json(file.path(), false, &scanned_indexed);
  EXPECT_EQ(scanned_indexed, 0U);
  EXPECT_EQ(through_index, scanned);
  EXPECT_NE(scanned.find("late.py"), std::string::npos);
}

TEST(SummaryDigest, SerializesAndParsesBack) {
  RecordingSummary summary;
  for (const SystemSample& s : varied_run(50)) summary.add(s);
  const std::optional<RecordingSummary> back = RecordingSummary::parse(summary.serialize());
  ASSERT_TRUE(back.has_value());
  RecordingMetadata metadata;
  EXPECT_EQ(format_summary_json("x", metadata, *back, {}),
            format_summary_json("x", metadata, summary, {}));
  EXPECT_FALSE(RecordingSummary::parse("not cbor").has_value());
  EXPECT_FALSE(RecordingSummary::parse("").has_value());
}

}  // namespace
}  // namespace vramscope::report
