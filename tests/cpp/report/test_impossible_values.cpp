// tests/cpp/report/test_impossible_values.cpp -- numbers no GPU can hold are refused at read, and
// differences of any numbers never wrap (`show`'s 16 EiB peak, `diff`'s negative growth, the
// report's "(-2 ns)" span)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>

#include "report/sample_fixtures.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/report/html_report.hpp"
#include "vramscope/report/recording_summary.hpp"
#include "vramscope/report/run_diff.hpp"
#include "vramscope/report/summary_plausible.hpp"

namespace vramscope::report {
namespace {

using testing::make_two_gpu_sample;
using testing::mib;

constexpr uint64_t uint64_max = std::numeric_limits<uint64_t>::max();

/// A private scratch path, removed at the end.
struct ScratchPath {
  std::string path;
  ScratchPath() {
    std::string pattern = (std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp");
    pattern += "/vramscope-impossible-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    if (fd >= 0) ::close(fd);
    path = pattern;
  }
  ~ScratchPath() { ::unlink(path.c_str()); }
};

TEST(ImpossibleValues, SampleFieldsAboveAPebibyteAreNamed) {
  SystemSample s = make_two_gpu_sample();
  EXPECT_EQ(implausible_bytes(s), "");
  s.devices[1].used_bytes = uint64_max;
  EXPECT_EQ(implausible_bytes(s), "GPU 1 used_bytes 18446744073709551615");
  s = make_two_gpu_sample();
  s.allocators[0].peak_reserved_bytes = max_plausible_bytes + 1;
  EXPECT_NE(implausible_bytes(s).find("peak_reserved_bytes 1125899906842625"), std::string::npos);
  s = make_two_gpu_sample();
  s.devices[0].processes[0].used_bytes = max_plausible_bytes;  // the bound itself is allowed
  EXPECT_EQ(implausible_bytes(s), "");
  // A recorded driver breakdown (format 4) is checked part by part, optional parts included:
  // the join adds them to reserved, and a forged part must not wrap that sum. (On a device the
  // sample does not name, so that only the parts' own bound applies.)
  s = make_two_gpu_sample();
  s.allocators[0].device_uuid = "GPU-of-no-sample";
  DriverBreakdown parts;
  parts.context_bytes = 512 * mib;
  parts.other_bytes = max_plausible_bytes - parts.context_bytes;
  parts.driver_bytes = max_plausible_bytes;
  s.allocators[0].breakdown = parts;
  EXPECT_EQ(implausible_bytes(s), "");
  s.allocators[0].breakdown->nccl_bytes = uint64_max;
  EXPECT_NE(implausible_bytes(s).find("driver parts nccl_bytes 18446744073709551615"),
            std::string::npos)
      << implausible_bytes(s);
}

// Format 4's breakdown was checked one part at a time (each <= 2^50), never as a sum nor
// against the driver's reading: a non-PyTorch of 3 PiB at a 3 GiB peak reached `show`, `diff`,
// every export, the report, the live table and Prometheus.
TEST(ImpossibleValues, ADriverBreakdownIsPlausibleAsAWhole) {
  const SystemSample honest = make_two_gpu_sample();
  ASSERT_EQ(implausible_bytes(honest), "");
  const auto with = [&](auto&& forge) {
    SystemSample s = honest;
    forge(*s.allocators[0].breakdown);
    return implausible_bytes(s);
  };
  // Three parts of 1 PiB each, every one within the bound, at a reading of 3 GiB.
  EXPECT_EQ(with([](DriverBreakdown& b) {
              b.driver_bytes = 3072 * mib;
              b.reserved_bytes = 0;
              b.context_bytes = max_plausible_bytes;
              b.other_bytes = max_plausible_bytes;
              b.nccl_bytes = max_plausible_bytes;
            }),
            "agent of pid 4021 driver parts non_pytorch_bytes 3377699720527872 above driver_bytes "
            "3221225472");
  // Context, other and NCCL taken out of the reading must fit in it.
  EXPECT_NE(
      with([](DriverBreakdown& b) { b.context_bytes = b.driver_bytes; }).find("non_pytorch_bytes"),
      std::string::npos);
  // With torch's reserved they fill it exactly; beyond that only by the excess the agent named.
  EXPECT_NE(with([](DriverBreakdown& b) {
              b.reserved_bytes += mib;
            }).find("reserved_bytes + non_pytorch_bytes"),
            std::string::npos);
  EXPECT_EQ(with([](DriverBreakdown& b) {
              b.reserved_bytes += mib;
              b.excess_bytes = mib;
            }),
            "");
  // No part is more than the device holds (GPU 0: 143771 MiB), the first context included.
  EXPECT_EQ(with([](DriverBreakdown& b) { b.first_context_bytes = 143772 * mib; }),
            "agent of pid 4021 driver parts first_context_bytes 150755868672 above the device's "
            "total_bytes 150754820096");
  EXPECT_NE(with([](DriverBreakdown& b) {
              b.reserved_bytes = 200000 * mib;  // beyond the reading, by an excess named
              b.excess_bytes = b.reserved_bytes;
            }).find("reserved_bytes 209715200000 above the device's total_bytes"),
            std::string::npos);
  // The excess is no bytes on the device: a reserved of 140 GiB against a reading of 1 GiB.
  EXPECT_EQ(with([](DriverBreakdown& b) {
              b.reserved_bytes = 143360 * mib;
              b.driver_bytes = 1024 * mib;
              b.other_bytes = 0;
              b.context_bytes = 0;
              b.excess_bytes = b.reserved_bytes - b.driver_bytes;
            }),
            "");
}

// A digest's parts at a peak are held to the same sums, against the device the digest names.
TEST(ImpossibleValues, ADigestWhoseDriverPartsCannotBeIsNoSummary) {
  SystemSample s = make_two_gpu_sample();
  s.allocators[0].breakdown->context_bytes = max_plausible_bytes;
  RecordingSummary forged;
  forged.add(s);
  ASSERT_TRUE(forged.processes().begin()->second.parts_at_peak.has_value());
  EXPECT_NE(implausible_bytes(forged).find("pid 4021 driver parts non_pytorch_bytes"),
            std::string::npos)
      << implausible_bytes(forged);
  EXPECT_FALSE(RecordingSummary::parse(forged.serialize()).has_value());
  s = make_two_gpu_sample();
  s.allocators[0].breakdown->first_context_bytes = 143772 * mib;
  RecordingSummary beyond_the_device;
  beyond_the_device.add(s);
  EXPECT_NE(implausible_bytes(beyond_the_device).find("above the device's total_bytes"),
            std::string::npos)
      << implausible_bytes(beyond_the_device);
}

// The reader ends the data at the sample whose breakdown cannot be, as at any impossible value.
TEST(ImpossibleValues, ARecordingEndsAtASampleWhoseDriverPartsCannotBe) {
  ScratchPath file;
  {
    RecordingWriterOptions options;
    options.overwrite = true;
    options.sync_each_chunk = false;
    RecordingMetadata metadata;
    metadata.hostname = "host";
    auto writer = RecordingWriter::create(file.path, metadata, options);
    SystemSample s = make_two_gpu_sample();
    for (int i = 0; i < 5; ++i) {
      s.timestamp_ns += 100'000'000;
      if (i == 3) {
        s.allocators[0].breakdown->other_bytes = max_plausible_bytes;
        s.allocators[0].breakdown->nccl_bytes = max_plausible_bytes;
      }
      writer->append(s);
    }
    writer->close();
  }
  auto reader = RecordingReader::open(file.path);
  RecordingTail tail;
  const RecordingSummary summary = summarise_recording(*reader, tail);
  EXPECT_EQ(summary.sample_count(), 3U);
  EXPECT_EQ(tail.state, TailState::Corrupt);
  EXPECT_NE(tail.message.find("impossible value: agent of pid 4021 driver parts non_pytorch_bytes"),
            std::string::npos)
      << tail.message;
}

// A forged recording (valid checksums) with a 2^64-1 byte peak: `show` printed "16.0 EiB" as
// a fact, through the index digest and through the samples alike.
TEST(ImpossibleValues, ARecordingEndsAtTheImpossibleSampleAndItsDigestIsNotTrusted) {
  ScratchPath file;
  {
    RecordingWriterOptions options;
    options.overwrite = true;
    options.sync_each_chunk = false;
    options.digest = std::make_shared<SummaryDigest>();
    RecordingMetadata metadata;
    metadata.hostname = "host";
    auto writer = RecordingWriter::create(file.path, metadata, options);
    SystemSample s = make_two_gpu_sample();
    for (int i = 0; i < 6; ++i) {
      s.timestamp_ns += 100'000'000;
      s.devices[0].used_bytes = i == 4 ? uint64_max : (1000 + i) * mib;
      writer->append(s);
    }
    writer->close();
  }
  {
    // show and show --scan alike read every sample (the digests are never trusted).
    auto reader = RecordingReader::open(file.path);
    RecordingTail tail;
    const RecordingSummary summary = summarise_recording(*reader, tail);
    EXPECT_EQ(summary.sample_count(), 4U);
    EXPECT_EQ(tail.state, TailState::Corrupt);
    EXPECT_NE(tail.message.find("impossible value: GPU 0 used_bytes 18446744073709551615"),
              std::string::npos)
        << tail.message;
    for (const auto& [uuid, d] : summary.devices()) {
      EXPECT_LE(d.peak_used_bytes.value_or(0), max_plausible_bytes) << uuid;
    }
  }
}

TEST(ImpossibleValues, ADigestWithAnImpossiblePeakIsNoSummary) {
  RecordingSummary forged;
  SystemSample s = make_two_gpu_sample();
  forged.add(s);
  ASSERT_TRUE(RecordingSummary::parse(forged.serialize()).has_value());
  s.allocators[0].peak_allocated_bytes = uint64_max;
  forged.add(s);
  EXPECT_NE(implausible_bytes(forged).find("torch_peak_allocated_bytes"), std::string::npos);
  EXPECT_FALSE(RecordingSummary::parse(forged.serialize()).has_value());
}

TEST(ImpossibleValues, ADigestWithImpossibleDriverPartsAtAPeakIsNoSummary) {
  RecordingSummary forged;
  SystemSample s = make_two_gpu_sample();
  DriverBreakdown parts;
  parts.other_bytes = uint64_max;
  s.allocators[0].breakdown = parts;
  forged.add(s);
  ASSERT_TRUE(forged.processes().begin()->second.parts_at_peak.has_value());
  EXPECT_NE(implausible_bytes(forged).find("pid 4021 driver parts other_bytes"), std::string::npos)
      << implausible_bytes(forged);
  EXPECT_FALSE(RecordingSummary::parse(forged.serialize()).has_value());
}

// `diff` printed a growth from 0 to 2^64-1 as "-1 B".
TEST(ImpossibleValues, DiffDeltasSaturateInsteadOfWrapping) {
  EXPECT_EQ((Change{0, uint64_max}.delta()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ((Change{uint64_max, 0}.delta()), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((Change{0, uint64_t{1} << 63U}.delta()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ((Change{uint64_t{1} << 63U, 0}.delta()), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((Change{5 * mib, 3 * mib}.delta()), -static_cast<int64_t>(2 * mib));
  EXPECT_EQ((Change{3 * mib, 5 * mib}.delta()), static_cast<int64_t>(2 * mib));
  const std::vector<std::string> grown = peaks_grown(
      RunDiff{{DeviceDiff{0, std::nullopt, std::nullopt, Change{0, uint64_max}}}, {}}, 5.0);
  ASSERT_EQ(grown.size(), 1U);
  EXPECT_EQ(grown[0].find("grew -"), std::string::npos) << grown[0];
}

// The report's span subtracted the first timestamp from the last without saturating.
TEST(ImpossibleValues, TheReportsSpanNeverGoesNegative) {
  RunProfile run;
  run.path = "run.vsrec";
  TimelineCollector timeline(200, 100'000'000);
  SystemSample s = make_two_gpu_sample();
  for (const int64_t ts :
       {std::numeric_limits<int64_t>::min() + 1, std::numeric_limits<int64_t>::max() - 1}) {
    s.timestamp_ns = ts;
    run.summary.add(s);
    timeline.add(s);
  }
  const std::string page = format_html_report(run, timeline.finish());
  EXPECT_EQ(page.find("(-"), std::string::npos) << "a negative span";
}

}  // namespace
}  // namespace vramscope::report
