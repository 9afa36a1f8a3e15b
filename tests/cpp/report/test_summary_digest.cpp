// tests/cpp/report/test_summary_digest.cpp -- `show` through the index equals `show` of every sample
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/fixtures.hpp"
#include "format/forge_recording.hpp"
#include "format/memory_limit.hpp"
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
    if (i % 7 == 3) {
      a.breakdown.reset();  // some peaks fall on a sample without a settled pairing
    } else {
      DriverBreakdown b;
      b.paired_ns = s.timestamp_ns - 50'000'000;
      b.reserved_bytes = 16000 * mib;
      b.context_bytes = (600 + i % 50) * mib;
      b.other_bytes = (i % 3 == 0) ? std::optional<uint64_t>() : std::optional<uint64_t>(i * mib);
      b.nccl_bytes = (i % 5 == 0) ? std::optional<uint64_t>(64 * mib) : std::nullopt;
      b.private_pool_bytes = i % 2 * 8 * mib;
      b.driver_bytes = b.reserved_bytes + b.non_pytorch_bytes();
      b.nccl_version = i % 5 == 0 ? 22907 : 0;
      b.unsettled_count = static_cast<uint32_t>(i / 4);
      a.breakdown = b;
    }
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

std::string summary_json(const std::string& path) {
  auto reader = RecordingReader::open(path);
  RecordingTail tail;
  const RecordingSummary summary = summarise_recording(*reader, tail);
  return format_summary_json("x.vsrec", reader->metadata(), summary, tail);
}

/// The index's digests of `path`, merged in file order (nullopt when one does not parse).
std::optional<RecordingSummary> merged_digests(const std::string& path, std::size_t* segments) {
  auto reader = RecordingReader::open(path);
  RecordingSummary merged;
  *segments = 0;
  for (const RecordingSegment& segment : reader->segments()) {
    const std::optional<std::string> digest = reader->read_digest(segment);
    if (!digest) return std::nullopt;
    std::optional<RecordingSummary> part = RecordingSummary::parse(*digest);
    if (!part) return std::nullopt;
    merged.merge(*part);
    ++*segments;
  }
  return merged;
}

/// Writes `run` to `path` in many small segments, each with its digest; checks that the merged
/// digests (over more than `min_segments` segments) give the summary that reading every sample
/// gives, and returns that summary's JSON.
std::string merged_equals_scanned(const std::string& path, const std::vector<SystemSample>& run,
                                  const RecordingMetadata& metadata, std::size_t min_segments) {
  RecordingWriterOptions options;
  options.overwrite = true;
  options.sync_each_chunk = false;
  options.segment_bytes = 16U << 10U;  // many segments
  options.digest = std::make_shared<SummaryDigest>();
  auto writer = RecordingWriter::create(path, metadata, options);
  for (const SystemSample& s : run) {
    writer->append(s);
    writer->flush();
  }
  writer->close();
  std::size_t segments = 0;
  const std::optional<RecordingSummary> merged = merged_digests(path, &segments);
  EXPECT_TRUE(merged.has_value());
  EXPECT_GT(segments, min_segments);
  const std::string scanned = summary_json(path);
  if (merged) {
    EXPECT_EQ(format_summary_json("x.vsrec", RecordingReader::open(path)->metadata(), *merged, {}),
              scanned);
  }
  return scanned;
}

TEST(SummaryDigest, MergedDigestsEqualReadingEverySample) {
  ScratchFile file;
  RecordingMetadata metadata;
  metadata.hostname = "node-7";
  const std::string scanned = merged_equals_scanned(file.path(), varied_run(3000), metadata, 10U);
  EXPECT_NE(scanned.find("late.py"), std::string::npos);
  EXPECT_NE(scanned.find("\"driver_parts_at_peak\": {"), std::string::npos) << scanned;
}

TEST(SummaryDigest, APollingProcessIsSampledInTheMergedDigestsAsInEverySample) {
  ScratchFile file;
  std::vector<SystemSample> run = varied_run(1500);
  // The trainer polls from the middle on, says why only later, then changes its reason.
  for (std::size_t i = 750; i < run.size(); ++i) {
    run[i].allocators[0].polling_only = true;
    if (i >= 1000) run[i].allocators[0].polling_reason = i < 1200 ? "first reason" : "last: fix";
  }
  const std::string scanned = merged_equals_scanned(file.path(), run, RecordingMetadata{}, 5U);
  const nlohmann::json doc = nlohmann::json::parse(scanned);
  for (const auto& p : doc["processes"]) {
    const bool trainer = p["pid"] == 4021;
    EXPECT_EQ(p["peaks_sampled"], trainer) << p;
    EXPECT_EQ(p["polling_reason"], trainer ? nlohmann::json("last: fix") : nlohmann::json()) << p;
  }
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

// Through breakdown_fields: every field of the parts at a peak, each optional part absent in turn.
TEST(SummaryDigest, EveryBreakdownFieldOfThePartsAtAPeakParsesBack) {
  for (const std::string_view absent :
       {"", "private_pool_bytes", "nccl_bytes", "other_bytes", "first_context_bytes"}) {
    SystemSample s = testing::make_two_gpu_sample();
    s.allocators[0].breakdown = testing::distinct_breakdown(absent);
    RecordingSummary summary;
    summary.add(s);
    const std::optional<RecordingSummary> back = RecordingSummary::parse(summary.serialize());
    ASSERT_TRUE(back.has_value()) << absent;
    const ProcessPeak& trainer = back->processes().begin()->second;
    EXPECT_EQ(trainer.parts_at_peak, s.allocators[0].breakdown) << absent;
  }
}

TEST(SummaryDigest, ADigestWrittenBeforeTheDriverPartsStillParses) {
  RecordingSummary summary;
  for (const SystemSample& s : varied_run(50)) summary.add(s);
  ASSERT_TRUE(summary.processes().begin()->second.parts_at_peak.has_value());
  // The process entries as the first writers made them: 13 elements, no parts at the peak.
  const std::string bytes = summary.serialize();
  nlohmann::json doc = nlohmann::json::from_cbor(bytes);
  for (nlohmann::json& entry : doc.at("p")) {
    ASSERT_EQ(entry.size(), 14U);
    entry.erase(13);
  }
  const std::vector<std::uint8_t> older = nlohmann::json::to_cbor(doc);
  const std::optional<RecordingSummary> back =
      RecordingSummary::parse(std::string(older.begin(), older.end()));
  ASSERT_TRUE(back.has_value());
  for (const auto& [key, p] : back->processes()) {
    EXPECT_FALSE(p.parts_at_peak.has_value()) << p.pid;
    EXPECT_EQ(p.peak_used_bytes, summary.processes().at(key).peak_used_bytes) << p.pid;
  }
}

TEST(SummaryDigest, ADeeplyNestedDigestIsRefusedNotACrash) {
  // nlohmann's CBOR reader recurses per level: 200,000 levels overflowed the stack (SIGSEGV).
  EXPECT_FALSE(RecordingSummary::parse(forge::deep_cbor(200'000)).has_value());
  EXPECT_FALSE(RecordingSummary::parse(forge::deep_cbor(9)).has_value());
  EXPECT_TRUE(RecordingSummary::parse(RecordingSummary().serialize()).has_value());
  const std::string bytes = forge::forge_deep_digest();
  ASSERT_LT(bytes.size(), 4096U);
  auto reader = RecordingReader::open_bytes(bytes);
  const std::vector<RecordingSegment> segments = reader->segments();
  ASSERT_EQ(segments.size(), 1U);
  const std::optional<std::string> digest = reader->read_digest(segments[0]);
  ASSERT_TRUE(digest.has_value());
  EXPECT_FALSE(RecordingSummary::parse(*digest).has_value());
}

TEST(SummaryDigest, ANewPidInEverySampleKeepsTheSummaryBounded) {
  // 200 samples of 1,900 new pids, each naming one 4 KiB command: 380,000 copies (1.5 GB) in
  // the summary, from a file of a few hundred KB.
  const std::string bytes = forge::forge_pid_churn(200, 1900, 4096);
  EXPECT_EXIT(
      {
        testing::limit_address_space(1ULL << 30U);
        auto reader = RecordingReader::open_bytes(bytes);
        RecordingTail tail;
        const RecordingSummary summary = summarise_recording(*reader, tail);
        // The string budget (16 MiB) runs out before the count (16,384): ~4,000 kept.
        const bool bounded = summary.sample_count() == 200 && summary.omitted() &&
                             summary.processes().size() > 1000 &&
                             summary.processes().size() <= max_summary_processes;
        ::_exit(bounded ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(SummaryDigest, MergingKeepsTheCaps) {
  RecordingSummary whole;
  for (uint32_t part = 0; part < 3; ++part) {
    RecordingSummary later;
    SystemSample s = forge::one_gpu(forge::at_ns(part));
    for (uint32_t k = 0; k < max_summary_processes / 2; ++k) {
      s.devices[0].processes.push_back(forge::process(part * 100000 + k, "x", k));
    }
    later.add(s);
    whole.merge(later);
  }
  EXPECT_EQ(whole.processes().size(), max_summary_processes);
  EXPECT_TRUE(whole.omitted());
  const std::optional<RecordingSummary> back = RecordingSummary::parse(whole.serialize());
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->omitted());
}

}  // namespace
}  // namespace vramscope::report
