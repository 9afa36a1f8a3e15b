// tests/cpp/format/test_agent_segment.cpp -- agent segments: round trip, seqlock, rings, cleanup
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "format/fixtures.hpp"
#include "format/test_data.hpp"
#include "vramscope/agent_segment.hpp"
#include "vramscope/format/agent_segment_layout.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/format/process_identity.hpp"
#include "vramscope/format/segment_dir.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

namespace fs = std::filesystem;

/// A fresh 0700 directory removed after the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "vramscope-seg-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    m_path = made;
  }
  ~TempDir() { fs::remove_all(m_path); }
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

using testing::poll;
using testing::Polled;

uint32_t self_pid() { return static_cast<uint32_t>(::getpid()); }

AllocatorSample sample_for(uint64_t i) {
  AllocatorSample s;
  s.pid = self_pid();
  s.rank = 3;
  s.world_size = 8;
  s.cuda_device = 1;
  s.device_uuid = "GPU-" + std::to_string(i);
  s.allocated_bytes = i;
  s.reserved_bytes = 3 * i + 7;
  s.requested_bytes = i ^ 0x5555U;
  s.active_bytes = i + 1;
  s.inactive_split_bytes = i * 2;
  s.peak_allocated_bytes = i + 10;
  s.peak_reserved_bytes = i + 20;
  s.step = i / 3;
  s.step_peak_allocated_bytes = i + 30;
  s.step_peak_reserved_bytes = i + 40;
  s.oom_count = i % 5;
  s.event_count = i * 7;
  s.dropped_event_count = i % 11;
  s.polling_only = i % 2 == 1;
  s.updated_ns = static_cast<int64_t>(i) + 1'000'000;
  return s;
}

/// Every field of a sample built by sample_for() follows from `allocated_bytes`.
void expect_consistent(const AllocatorSample& s) {
  const AllocatorSample want = sample_for(s.allocated_bytes);
  ASSERT_EQ(s.device_uuid, want.device_uuid);
  ASSERT_EQ(s.reserved_bytes, want.reserved_bytes);
  ASSERT_EQ(s.requested_bytes, want.requested_bytes);
  ASSERT_EQ(s.active_bytes, want.active_bytes);
  ASSERT_EQ(s.inactive_split_bytes, want.inactive_split_bytes);
  ASSERT_EQ(s.peak_allocated_bytes, want.peak_allocated_bytes);
  ASSERT_EQ(s.peak_reserved_bytes, want.peak_reserved_bytes);
  ASSERT_EQ(s.step, want.step);
  ASSERT_EQ(s.step_peak_allocated_bytes, want.step_peak_allocated_bytes);
  ASSERT_EQ(s.step_peak_reserved_bytes, want.step_peak_reserved_bytes);
  ASSERT_EQ(s.oom_count, want.oom_count);
  ASSERT_EQ(s.event_count, want.event_count);
  ASSERT_EQ(s.dropped_event_count, want.dropped_event_count);
  ASSERT_EQ(s.polling_only, want.polling_only);
  ASSERT_EQ(s.updated_ns, want.updated_ns);
}

StepRecord step_for(uint64_t step) {
  StepRecord r;
  r.rank = 3;
  r.cuda_device = 1;
  r.device_uuid = "GPU-aaaa";
  r.step = step;
  r.end_ns = static_cast<int64_t>(step) * 100;
  r.duration_ns = 99;
  r.peak_allocated_bytes = step * 2;
  r.peak_reserved_bytes = step * 3;
  r.peak_requested_bytes = step * 4;
  r.allocated_bytes = step * 5;
  r.reserved_bytes = step * 6;
  return r;
}

TEST(AgentSegment, RoundTripsEveryField) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 2, dir.path());
  auto reader = open_agent_segment_reader(dir.path());
  EXPECT_TRUE(poll(*reader).allocators.empty()) << "unpublished slots are not reported";

  writer->publish(1, sample_for(12345));
  OomRecord oom;
  oom.rank = 2;
  oom.cuda_device = 1;
  oom.device_uuid = "GPU-12345678-abcd";
  oom.timestamp_ns = 42;
  oom.requested_bytes = 400'000'286'720;
  oom.device_total_bytes = 150'109'880'320;
  oom.device_free_bytes = 149'372'928'000;
  oom.allocated_bytes = 7;
  oom.reserved_bytes = 8;
  writer->push_oom(oom);
  writer->push_step(step_for(1));

  Polled first = poll(*reader);
  ASSERT_EQ(first.allocators.size(), 1U);
  EXPECT_EQ(first.allocators[0].pid, self_pid());
  EXPECT_EQ(first.allocators[0].rank, 3);
  EXPECT_EQ(first.allocators[0].world_size, 8);
  EXPECT_EQ(first.allocators[0].cuda_device, 1);
  EXPECT_EQ(first.allocators[0].allocated_bytes, 12345U);
  expect_consistent(first.allocators[0]);

  ASSERT_EQ(first.steps.size(), 1U);
  const StepRecord& step = first.steps[0];
  const StepRecord want = step_for(1);
  EXPECT_EQ(step.pid, self_pid());
  EXPECT_EQ(step.rank, want.rank);
  EXPECT_EQ(step.cuda_device, want.cuda_device);
  EXPECT_EQ(step.device_uuid, want.device_uuid);
  EXPECT_EQ(step.step, want.step);
  EXPECT_EQ(step.end_ns, want.end_ns);
  EXPECT_EQ(step.duration_ns, want.duration_ns);
  EXPECT_EQ(step.peak_allocated_bytes, want.peak_allocated_bytes);
  EXPECT_EQ(step.peak_reserved_bytes, want.peak_reserved_bytes);
  EXPECT_EQ(step.peak_requested_bytes, want.peak_requested_bytes);
  EXPECT_EQ(step.allocated_bytes, want.allocated_bytes);
  EXPECT_EQ(step.reserved_bytes, want.reserved_bytes);

  ASSERT_EQ(first.ooms.size(), 1U);
  EXPECT_EQ(first.ooms[0].pid, self_pid());
  EXPECT_EQ(first.ooms[0].rank, 2);
  EXPECT_EQ(first.ooms[0].device_uuid, oom.device_uuid);
  EXPECT_EQ(first.ooms[0].timestamp_ns, 42);
  EXPECT_EQ(first.ooms[0].requested_bytes, oom.requested_bytes);
  EXPECT_EQ(first.ooms[0].device_total_bytes, oom.device_total_bytes);
  EXPECT_EQ(first.ooms[0].device_free_bytes, oom.device_free_bytes);
  EXPECT_EQ(first.ooms[0].allocated_bytes, 7U);
  EXPECT_EQ(first.ooms[0].reserved_bytes, 8U);

  Polled second = poll(*reader);
  EXPECT_EQ(second.allocators.size(), 1U) << "current stats are reported on every poll";
  EXPECT_TRUE(second.steps.empty()) << "steps are reported once";
  EXPECT_TRUE(second.ooms.empty()) << "OOMs are reported once";
}

TEST(AgentSegment, StepCategoriesRoundTripAndStayOptional) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  StepRecord with = step_for(1);
  // Values above 2^32 and one zero: every byte of each field matters.
  with.category_bytes =
      CategoryBytes{5'000'000'001ULL, 5'000'000'002ULL, 10'000'000'004ULL, 123'456'789ULL, 0, 42};
  writer->push_step(with);
  writer->push_step(step_for(2));
  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  ASSERT_EQ(out.steps.size(), 2U);
  ASSERT_TRUE(out.steps[0].category_bytes.has_value());
  EXPECT_EQ(*out.steps[0].category_bytes, *with.category_bytes);
  EXPECT_EQ(out.steps[0].peak_requested_bytes, with.peak_requested_bytes);
  EXPECT_FALSE(out.steps[1].category_bytes.has_value()) << "no categories is not zeros";
  EXPECT_TRUE(reader->take_warnings().empty());
}

TEST(AgentSegment, DriverBreakdownRoundTripsWithItsOptionalPartsApart) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 2, dir.path());
  AllocatorSample with = sample_for(777);
  with.cuda_device = 0;
  DriverBreakdown b;
  // Values above 2^32 and zeros: every byte of each word matters, and zero is not "unknown".
  b.paired_ns = 1'764'000'000'123'456'789;
  b.driver_bytes = 9'000'000'001ULL;
  b.reserved_bytes = 6'000'000'002ULL;
  b.private_pool_bytes = 0;
  b.other_bytes = 1'073'741'824ULL;
  b.context_bytes = 569'000'003ULL;
  b.first_context_bytes = 543'162'368ULL;
  b.excess_bytes = 5;
  b.nccl_version = 22809;
  b.unsettled_count = 17;
  with.breakdown = b;
  writer->publish(0, with);
  AllocatorSample without = sample_for(778);
  without.cuda_device = 1;
  writer->publish(1, without);
  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  ASSERT_EQ(out.allocators.size(), 2U);
  const AllocatorSample& got =
      out.allocators[0].cuda_device == 0 ? out.allocators[0] : out.allocators[1];
  const AllocatorSample& bare =
      out.allocators[0].cuda_device == 0 ? out.allocators[1] : out.allocators[0];
  // Zero private pools stay zero and the unreported NCCL stays empty: zero is not "unknown".
  EXPECT_EQ(got.breakdown, std::optional<DriverBreakdown>(b));
  EXPECT_FALSE(bare.breakdown.has_value()) << "no pairing yet is no breakdown";
}

// Through breakdown_fields: every field in its word or field, each optional part absent in turn.
TEST(AgentSegment, EveryBreakdownFieldRoundTrips) {
  for (const std::string_view absent :
       {"", "private_pool_bytes", "nccl_bytes", "other_bytes", "first_context_bytes"}) {
    TempDir dir;
    auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
    AllocatorSample sample = sample_for(4242);
    sample.breakdown = testing::distinct_breakdown(absent);
    writer->publish(0, sample);
    auto reader = open_agent_segment_reader(dir.path());
    const Polled out = poll(*reader);
    ASSERT_EQ(out.allocators.size(), 1U) << absent;
    EXPECT_EQ(out.allocators[0].breakdown, sample.breakdown) << absent;
  }
}

TEST(AgentSegment, SlotWithUnknownFlagsOrAnImpossibleBreakdownIsRefused) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  AllocatorSample sample = sample_for(1);
  DriverBreakdown b;
  b.driver_bytes = 1;
  sample.breakdown = b;
  writer->publish(0, sample);
  const auto geometry =
      format::segment_geometry(sizeof(format::SegmentHeader), sizeof(format::NoteBlock), 1,
                               format::segment_step_capacity, format::segment_oom_capacity);
  const auto at = [&](std::size_t field) {
    return static_cast<off_t>(geometry.slots_offset + offsetof(format::SlotBlock, payload) + field);
  };
  auto damage = [&](off_t where, uint64_t value, std::size_t bytes) {
    const int fd = ::open(writer->path().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, &value, bytes, where), static_cast<ssize_t>(bytes));
    ::close(fd);
  };
  auto reader = open_agent_segment_reader(dir.path());
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);
  damage(at(offsetof(format::SlotStats, breakdown_bytes)), uint64_t{1} << 62U, 8);
  EXPECT_TRUE(poll(*reader).allocators.empty()) << "a part no device can hold";
  writer->publish(0, sample);
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);
  damage(at(offsetof(format::SlotStats, flags)), format::slot_flag_breakdown | (1U << 20U), 4);
  EXPECT_TRUE(poll(*reader).allocators.empty()) << "a flag this version does not know";
}

// A recording's reader refuses a breakdown whose parts cannot be; a segment's reader likewise
// skips the slot (core/plausible.hpp, one function for both).
TEST(AgentSegment, SlotWhoseDriverPartsCannotBeIsRefused) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  AllocatorSample sample = sample_for(1);
  sample.breakdown = testing::distinct_breakdown();
  writer->publish(0, sample);
  auto reader = open_agent_segment_reader(dir.path());
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);
  // Three parts of 1 PiB each, every one within the bound, taken out of a reading of 3 GiB.
  sample.breakdown->driver_bytes = 3ULL << 30U;
  sample.breakdown->context_bytes = uint64_t{1} << 50U;
  sample.breakdown->other_bytes = uint64_t{1} << 50U;
  sample.breakdown->nccl_bytes = uint64_t{1} << 50U;
  writer->publish(0, sample);
  EXPECT_TRUE(poll(*reader).allocators.empty()) << "non-PyTorch above the driver's reading";
}

TEST(AgentSegment, StepWithUnknownFlagBitsLosesItsCategoriesOnly) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  StepRecord step = step_for(7);
  step.category_bytes = CategoryBytes{1, 2, 3, 4, 5, 6};
  writer->push_step(step);
  // Damage the entry's flags in place (as a buggy or hostile writer would); the seqlock stays
  // even, so the reader takes the entry and must judge the flags itself.
  const auto geometry =
      format::segment_geometry(sizeof(format::SegmentHeader), sizeof(format::NoteBlock), 1,
                               format::segment_step_capacity, format::segment_oom_capacity);
  const off_t flags_at =
      static_cast<off_t>(geometry.steps_offset + offsetof(format::StepEntry, payload) +
                         offsetof(format::StepPayload, flags));
  const uint64_t bad_flags = format::step_flag_categories | (1U << 5U);
  const int fd = ::open(writer->path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, &bad_flags, sizeof bad_flags, flags_at),
            static_cast<ssize_t>(sizeof bad_flags));
  ::close(fd);
  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  ASSERT_EQ(out.steps.size(), 1U);
  EXPECT_EQ(out.steps[0].step, 7U);
  EXPECT_FALSE(out.steps[0].category_bytes.has_value());
}

TEST(AgentSegment, OtherFormatVersionIsRefusedWithOneClearWarning) {
  TempDir dir;
  std::string bytes;
  {
    auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
    writer->publish(0, sample_for(5));
    std::ifstream in(writer->path(), std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // A version-1 writer (the layout before step categories) of a live process: pid 1.
  format::SegmentHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  header.version = 1;
  header.writer_pid = 1;
  std::memcpy(bytes.data(), &header, sizeof header);
  const std::string path = dir.path() + "/agent-1.seg";
  std::ofstream(path, std::ios::binary) << bytes;
  ::chmod(path.c_str(), 0600);

  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  EXPECT_TRUE(out.allocators.empty()) << "a segment of another version is never read";
  const std::vector<std::string> warnings = reader->take_warnings();
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_NE(warnings[0].find("agent-1.seg"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("format v1"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("reads v" + std::to_string(format::segment_oldest_version) + " to v" +
                             std::to_string(format::segment_version)),
            std::string::npos)
      << warnings[0];
  poll(*reader);
  EXPECT_TRUE(reader->take_warnings().empty()) << "each file is reported once";
  EXPECT_TRUE(fs::exists(path)) << "a file of another version is left alone";
}

TEST(AgentSegment, NewerFormatVersionIsRefusedToo) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, sample_for(5));
  const int fd = ::open(writer->path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const uint16_t newer = format::segment_version + 1;
  ASSERT_EQ(::pwrite(fd, &newer, sizeof newer, offsetof(format::SegmentHeader, version)),
            static_cast<ssize_t>(sizeof newer));
  ::close(fd);
  auto reader = open_agent_segment_reader(dir.path());
  EXPECT_TRUE(poll(*reader).allocators.empty());
  const std::vector<std::string> warnings = reader->take_warnings();
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_NE(warnings[0].find("format v" + std::to_string(newer)), std::string::npos) << warnings[0];
}

TEST(AgentSegment, PollingReasonGoesToThePolledSlotsOnly) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 2, dir.path());
  AllocatorSample polled = sample_for(3);  // odd: polling_only
  polled.cuda_device = 0;
  AllocatorSample exact = sample_for(4);
  ASSERT_TRUE(polled.polling_only);
  ASSERT_FALSE(exact.polling_only);
  writer->publish(0, polled);
  writer->publish(1, exact);
  auto reader = open_agent_segment_reader(dir.path());
  Polled before = poll(*reader);
  ASSERT_EQ(before.allocators.size(), 2U);
  EXPECT_EQ(before.allocators[0].polling_reason, "") << "no note written yet";

  const std::string reason =
      "compiling the agent for torch 2.11.0+cu130 failed (crt/host_config.h: No such file): pip "
      "install nvidia-cuda-crt";
  writer->set_polling_reason(reason);
  Polled after = poll(*reader);
  ASSERT_EQ(after.allocators.size(), 2U);
  EXPECT_TRUE(after.allocators[0].polling_only);
  EXPECT_EQ(after.allocators[0].polling_reason, reason);
  EXPECT_FALSE(after.allocators[1].polling_only);
  EXPECT_EQ(after.allocators[1].polling_reason, "") << "a slot with exact numbers has no reason";

  writer->set_polling_reason("no C++ compiler: apt install g++");
  EXPECT_EQ(poll(*reader).allocators[0].polling_reason, "no C++ compiler: apt install g++")
      << "a new note is read again";
}

TEST(AgentSegment, LongPollingReasonIsCutBeforeACharacterItCannotHoldWhole) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, sample_for(1));
  // 510 ASCII bytes, then "é" (2 bytes) that would end at byte 512: no room for its NUL.
  const std::string reason = std::string(510, 'x') + "\xC3\xA9 and more";
  writer->set_polling_reason(reason);
  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  ASSERT_EQ(out.allocators.size(), 1U);
  EXPECT_EQ(out.allocators[0].polling_reason, std::string(510, 'x'));
}

/// A version-3 segment (the layout before the note) made from `bytes`, a version-4 file: its
/// note cut out, its header as a version-3 writer filled it (the note's word was reserved, 0).
std::string as_version_3(std::string bytes) {
  format::SegmentHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  header.version = 3;
  header.note_bytes = 0;
  header.total_bytes -= sizeof(format::NoteBlock);
  std::memcpy(bytes.data(), &header, sizeof header);
  bytes.erase(sizeof header, sizeof(format::NoteBlock));
  return bytes;
}

TEST(AgentSegment, VersionThreeSegmentOfThePreviousReleaseIsStillRead) {
  TempDir made;
  std::string bytes;
  {
    auto writer = open_agent_segment_writer(self_pid(), 2, made.path());
    writer->publish(1, sample_for(12345));
    writer->set_polling_reason("not in version 3");
    writer->push_step(step_for(1));
    std::ifstream in(writer->path(), std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  TempDir dir;
  const std::string path = dir.path() + "/" + format::segment_file_name(self_pid());
  std::ofstream(path, std::ios::binary) << as_version_3(bytes);
  ::chmod(path.c_str(), 0600);
  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  EXPECT_TRUE(reader->take_warnings().empty());
  ASSERT_EQ(out.allocators.size(), 1U);
  expect_consistent(out.allocators[0]);
  EXPECT_TRUE(out.allocators[0].polling_only);
  EXPECT_EQ(out.allocators[0].polling_reason, "") << "version 3 has no note";
  ASSERT_EQ(out.steps.size(), 1U);
  EXPECT_EQ(out.steps[0].peak_requested_bytes, step_for(1).peak_requested_bytes);
}

TEST(AgentSegment, NoteSizeThatIsNotItsVersionsIsRefused) {
  TempDir made;
  std::string bytes;
  {
    auto writer = open_agent_segment_writer(self_pid(), 1, made.path());
    writer->publish(0, sample_for(2));
    std::ifstream in(writer->path(), std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  const std::string v3 = as_version_3(bytes);
  const auto with_header = [](std::string file, auto edit) {
    format::SegmentHeader header{};
    std::memcpy(&header, file.data(), sizeof header);
    edit(header);
    std::memcpy(file.data(), &header, sizeof header);
    return file;
  };
  // A version-4 header without a note, a version-3 one with one, a note of another size: the
  // note's size is fixed by the version, as the slots' is by the build, and no writer of ours
  // makes any of these.
  const std::string forged[] = {
      with_header(v3, [](format::SegmentHeader& h) { h.version = 4; }),
      with_header(bytes, [](format::SegmentHeader& h) { h.version = 3; }),
      with_header(bytes, [](format::SegmentHeader& h) { h.note_bytes = 8; }),
  };
  for (const std::string& file : forged) {
    TempDir dir;
    const std::string path = dir.path() + "/" + format::segment_file_name(self_pid());
    std::ofstream(path, std::ios::binary) << file;
    ::chmod(path.c_str(), 0600);
    auto reader = open_agent_segment_reader(dir.path());
    EXPECT_TRUE(poll(*reader).allocators.empty());
  }
}

TEST(AgentSegment, LongUuidIsTruncatedNotOverflowed) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  AllocatorSample s = sample_for(1);
  s.device_uuid = std::string(300, 'x');
  writer->publish(0, s);
  auto reader = open_agent_segment_reader(dir.path());
  Polled out = poll(*reader);
  ASSERT_EQ(out.allocators.size(), 1U);
  EXPECT_EQ(out.allocators[0].device_uuid, std::string(format::segment_uuid_bytes - 1, 'x'));
}

TEST(AgentSegment, FilesAreOwnerOnlyAndRemovedByTheWriter) {
  TempDir parent;
  const std::string dir = parent.path() + "/segments";
  std::string path;
  {
    auto writer = open_agent_segment_writer(self_pid(), 1, dir);
    path = writer->path();
    EXPECT_EQ(path, dir + "/agent-" + std::to_string(self_pid()) + ".seg");
    struct stat info {};
    ASSERT_EQ(::stat(dir.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0700U);
    ASSERT_EQ(::lstat(path.c_str(), &info), 0);
    EXPECT_TRUE(S_ISREG(info.st_mode));
    EXPECT_EQ(info.st_mode & 07777, 0600U);
    int entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
    EXPECT_EQ(entries, 1) << "no temporary file is left behind";
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(AgentSegment, WriterRefusesUnsafeDirectories) {
  TempDir parent;
  const std::string open_dir = parent.path() + "/open";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  EXPECT_THROW(open_agent_segment_writer(self_pid(), 1, open_dir), Error);

  const std::string real_dir = parent.path() + "/real";
  const std::string link = parent.path() + "/link";
  ASSERT_EQ(::mkdir(real_dir.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(real_dir.c_str(), link.c_str()), 0);
  EXPECT_THROW(open_agent_segment_writer(self_pid(), 1, link), Error);

  EXPECT_THROW(open_agent_segment_writer(self_pid(), 0, real_dir), Error);
  EXPECT_THROW(open_agent_segment_writer(self_pid(), 100000, real_dir), Error);

  // A reader of an unsafe directory sees no agents and does not fail.
  auto reader = open_agent_segment_reader(open_dir);
  EXPECT_TRUE(poll(*reader).allocators.empty());
}

TEST(AgentSegment, ConcurrentReaderOnlySeesConsistentCopies) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  auto reader = open_agent_segment_reader(dir.path());
  constexpr uint64_t publishes = 200'000;
  constexpr uint64_t steps_pushed = 20'000;
  // The reader must map the segment before the first push: records overwritten before a reader
  // first looks are history it never had, not its loss (a loaded machine once let the writer
  // lap the ring before the reader's first poll).
  static_cast<void>(poll(*reader));
  std::atomic<bool> done{false};
  std::thread hammer([&] {
    for (uint64_t i = 1; i <= publishes; ++i) {
      writer->publish(0, sample_for(i));
      if (i % (publishes / steps_pushed) == 0) writer->push_step(step_for(i / 10));
    }
    done.store(true, std::memory_order_release);
  });

  uint64_t reads = 0;
  uint64_t last_allocated = 0;
  uint64_t steps_returned = 0;
  uint64_t last_step = 0;
  auto check = [&](const Polled& out) {
    for (const AllocatorSample& s : out.allocators) {
      expect_consistent(s);
      EXPECT_GE(s.allocated_bytes, last_allocated) << "a reader never goes back in time";
      last_allocated = s.allocated_bytes;
      ++reads;
    }
    for (const StepRecord& r : out.steps) {
      EXPECT_GT(r.step, last_step) << "steps come in order, each once";
      EXPECT_EQ(r.peak_requested_bytes, r.step * 4);
      last_step = r.step;
      ++steps_returned;
    }
  };
  while (!done.load(std::memory_order_acquire)) check(poll(*reader));
  hammer.join();
  check(poll(*reader));
  EXPECT_GT(reads, 0U);
  EXPECT_EQ(last_allocated, publishes) << "the final value is visible after the writer stops";
  EXPECT_EQ(steps_returned + reader->lost_step_count(), steps_pushed);
}

TEST(Seqlock, NeverReturnsATornCopy) {
  // The same protocol as the segment, without the file system in between, so that reads and
  // writes overlap as often as possible: every word of a written payload equals its generation.
  // The writer goes on until the reader has made its reads: on a loaded machine the reader's
  // thread may not run at all while a fixed number of writes happen (it once did, on 2 cores).
  format::SlotBlock block{};
  constexpr uint64_t generations = 300'000;
  constexpr uint64_t wanted_reads = 2'000;
  std::atomic<uint64_t> good_reads{0};
  std::atomic<uint64_t> written{0};
  std::atomic<bool> done{false};
  std::thread writer([&] {
    format::SlotStats stats{};
    uint64_t g = 1;
    for (; g <= generations || good_reads.load(std::memory_order_relaxed) < wanted_reads; ++g) {
      uint64_t words[sizeof(stats) / 8];
      for (uint64_t& w : words) w = g;
      std::memcpy(&stats, words, sizeof(stats));
      format::seqlock_write(&block, stats);
      // Past the fixed count, leave the reader windows between writes.
      if (g > generations) std::this_thread::yield();
    }
    written.store(g - 1, std::memory_order_relaxed);
    done.store(true, std::memory_order_release);
  });
  uint64_t torn = 0;
  while (!done.load(std::memory_order_acquire)) {
    format::SlotStats copy{};
    if (!format::seqlock_read(&block, copy)) continue;
    uint64_t words[sizeof(copy) / 8];
    std::memcpy(words, &copy, sizeof(copy));
    for (uint64_t w : words) torn += w != words[0] ? 1 : 0;
    good_reads.fetch_add(1, std::memory_order_relaxed);
  }
  writer.join();
  EXPECT_EQ(torn, 0U);
  EXPECT_GE(good_reads.load(), wanted_reads);
  format::SlotStats last{};
  ASSERT_TRUE(format::seqlock_read(&block, last));
  EXPECT_EQ(last.counters[0], written.load());
}

TEST(AgentSegment, StepsAreReturnedOnceAcrossRingWrap) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  auto reader = open_agent_segment_reader(dir.path());
  writer->publish(0, sample_for(1));
  EXPECT_TRUE(poll(*reader).steps.empty());

  const uint64_t capacity = format::segment_step_capacity;
  const uint64_t burst = capacity + 44;
  for (uint64_t s = 1; s <= burst; ++s) writer->push_step(step_for(s));
  Polled out = poll(*reader);
  ASSERT_EQ(out.steps.size(), capacity);
  EXPECT_EQ(out.steps.front().step, burst - capacity + 1);
  EXPECT_EQ(out.steps.back().step, burst);
  EXPECT_EQ(reader->lost_step_count(), 44U);

  for (uint64_t s = burst + 1; s <= burst + 5; ++s) writer->push_step(step_for(s));
  out = poll(*reader);
  ASSERT_EQ(out.steps.size(), 5U);
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(out.steps[i].step, burst + 1 + i);
  EXPECT_TRUE(poll(*reader).steps.empty());
  EXPECT_EQ(reader->lost_step_count(), 44U);

  // A reader arriving late gets the ring's history and counts nothing as lost.
  auto late = open_agent_segment_reader(dir.path());
  out = poll(*late);
  ASSERT_EQ(out.steps.size(), capacity);
  EXPECT_EQ(out.steps.back().step, burst + 5);
  EXPECT_EQ(late->lost_step_count(), 0U);
}

TEST(AgentSegment, OomRingWrapsAndCountsLost) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  auto reader = open_agent_segment_reader(dir.path());
  poll(*reader);
  const uint64_t total = format::segment_oom_capacity + 3;
  for (uint64_t i = 1; i <= total; ++i) {
    OomRecord oom;
    oom.requested_bytes = i;
    writer->push_oom(oom);
  }
  Polled out = poll(*reader);
  ASSERT_EQ(out.ooms.size(), format::segment_oom_capacity);
  EXPECT_EQ(out.ooms.front().requested_bytes, 4U);
  EXPECT_EQ(reader->lost_oom_count(), 3U);
}

TEST(AgentSegment, DeadWriterSegmentIsRemoved) {
  TempDir dir;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child "crashes": it leaves without running the writer's destructor.
    int code = 0;
    try {
      auto writer = open_agent_segment_writer(static_cast<uint32_t>(::getpid()), 1, dir.path());
      writer->publish(0, sample_for(5));
      static_cast<void>(writer.release());  // leaked: a killed writer never cleans up
    } catch (...) {
      code = 1;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::string path = dir.path() + "/" + format::segment_file_name(child);
  ASSERT_TRUE(fs::exists(path)) << "the crashed child left its segment";

  auto reader = open_agent_segment_reader(dir.path());
  EXPECT_TRUE(poll(*reader).allocators.empty());
  EXPECT_FALSE(fs::exists(path)) << "a dead writer's segment is cleaned up";
}

// -- between listings: the segments a reader knows, read without listing the directory ----

/// Lets the directory's last change age past the reader's settle window: the listing after it
/// is trusted, and the polls after that read the segments they know without listing (the
/// window is a rule on the wall clock, not a wait for another thread).
void let_the_directory_settle() {
  std::this_thread::sleep_for(std::chrono::nanoseconds(agent_dir_settle_ns) +
                              std::chrono::milliseconds(10));
}

/// Writers in child processes, each publishing one segment in `dir` and waiting, until end()
/// ends them all as a crash does (their segments left behind) and reaps them.
class ChildWriters {
 public:
  ChildWriters(const std::string& dir, int count) {
    if (::pipe(m_ready) != 0 || ::pipe(m_go) != 0) throw std::runtime_error("pipe failed");
    for (int i = 0; i < count; ++i) {
      const pid_t child = ::fork();
      if (child < 0) throw std::runtime_error("fork failed");
      if (child == 0) run(dir, static_cast<uint64_t>(i) + 1);
      m_children.push_back(child);
    }
    ::close(m_go[0]);
    for (int i = 0; i < count; ++i) {
      char byte = 0;
      if (::read(m_ready[0], &byte, 1) != 1 || byte != 'r') throw std::runtime_error("no writer");
    }
  }
  ChildWriters(const ChildWriters&) = delete;
  ChildWriters& operator=(const ChildWriters&) = delete;
  ~ChildWriters() {
    end();
    ::close(m_ready[0]);
    ::close(m_ready[1]);
  }

  const std::vector<pid_t>& pids() const { return m_children; }

  /// Ends every writer and reaps it; true when each exited cleanly.
  bool end() {
    if (m_go[1] >= 0) ::close(m_go[1]);
    m_go[1] = -1;
    bool clean = true;
    for (const pid_t child : std::exchange(m_children, {})) {
      int status = 0;
      clean = ::waitpid(child, &status, 0) == child && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0 && clean;
    }
    return clean;
  }

 private:
  [[noreturn]] void run(const std::string& dir, uint64_t bytes) {
    ::close(m_go[1]);
    char byte = 'r';
    try {
      auto writer = open_agent_segment_writer(static_cast<uint32_t>(::getpid()), 1, dir);
      writer->publish(0, sample_for(bytes));
      static_cast<void>(writer.release());  // a crashed writer never cleans up
    } catch (...) {
      byte = 'x';
    }
    if (::write(m_ready[1], &byte, 1) != 1) ::_exit(1);
    while (::read(m_go[0], &byte, 1) > 0) {
    }
    ::_exit(0);
  }

  int m_ready[2] = {-1, -1};
  int m_go[2] = {-1, -1};
  std::vector<pid_t> m_children;
};

TEST(AgentSegmentBetweenListings, AWriterThatEndsIsDroppedAtTheNextPollAndItsFileRemoved) {
  TempDir dir;
  ChildWriters writer(dir.path(), 1);
  const std::string path = dir.path() + "/" + format::segment_file_name(writer.pids()[0]);
  let_the_directory_settle();
  auto reader = open_agent_segment_reader(dir.path());
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);  // listed
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);  // known
  ASSERT_TRUE(writer.end());
  ASSERT_TRUE(fs::exists(path)) << "the ended writer left its segment";
  EXPECT_TRUE(poll(*reader).allocators.empty()) << "the ended writer is reported no more";
  EXPECT_FALSE(fs::exists(path)) << "and its segment is cleaned up";
}

/// A writer of this process that published `bytes`, and a reader that listed it once the
/// directory had settled: its next polls read the segment without listing.
struct SettledSegment {
  std::unique_ptr<AgentSegmentWriter> writer;
  std::unique_ptr<AgentSegmentReader> reader;
  /// What the listing poll returned.
  Polled listed;
};

SettledSegment settled_segment(const std::string& dir, uint64_t bytes) {
  SettledSegment s;
  s.writer = open_agent_segment_writer(self_pid(), 1, dir);
  s.writer->publish(0, sample_for(bytes));
  let_the_directory_settle();
  s.reader = open_agent_segment_reader(dir);
  s.listed = poll(*s.reader);
  return s;
}

TEST(AgentSegmentBetweenListings, AFileShrunkUnderItsMappingIsNotRead) {
  TempDir dir;
  auto [writer, reader, listed] = settled_segment(dir.path(), 9);
  ASSERT_EQ(listed.allocators.size(), 1U);
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);
  // A truncation leaves the directory as it was: only the file's own size says it. Read
  // through the old mapping, the pages past the new end raise SIGBUS.
  EXPECT_EXIT(
      {
        const off_t half = static_cast<off_t>(fs::file_size(writer->path()) / 2);
        const bool cut = ::truncate(writer->path().c_str(), half) == 0;
        ::_exit(cut && poll(*reader).allocators.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(AgentSegmentBetweenListings, ANewWriterAndNewNumbersAreSeenAtTheNextPoll) {
  TempDir dir;
  auto [writer, reader, listed] = settled_segment(dir.path(), 11);
  ASSERT_EQ(listed.allocators.size(), 1U);
  writer->publish(0, sample_for(12));
  Polled known = poll(*reader);
  ASSERT_EQ(known.allocators.size(), 1U);
  EXPECT_EQ(known.allocators[0].allocated_bytes, 12U) << "what was published since is read";
  // A second writer (pid 1: alive, and its start time left unknown) appears: the directory
  // changed, and the next poll lists it.
  const std::string copy = dir.path() + "/" + format::segment_file_name(1);
  {
    std::ifstream in(writer->path(), std::ios::binary);
    std::ofstream(copy, std::ios::binary) << in.rdbuf();
  }
  ASSERT_EQ(::chmod(copy.c_str(), 0600), 0);
  const int fd = ::open(copy.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  format::SegmentHeader header{};
  ASSERT_EQ(::pread(fd, &header, sizeof(header), 0), static_cast<ssize_t>(sizeof(header)));
  header.writer_pid = 1;
  header.writer_start_ticks = 0;
  ASSERT_EQ(::pwrite(fd, &header, sizeof(header), 0), static_cast<ssize_t>(sizeof(header)));
  ::close(fd);
  std::vector<uint32_t> pids;
  for (const AllocatorSample& a : poll(*reader).allocators) pids.push_back(a.pid);
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<uint32_t>{1, self_pid()}));
}

/// Open file descriptors of this process.
std::size_t open_fds() {
  return static_cast<std::size_t>(
      std::distance(fs::directory_iterator("/proc/self/fd"), fs::directory_iterator{}));
}

TEST(AgentSegmentBetweenListings, WritersWatchedThroughPidfdsAreBoundedAndAllChecked) {
  // A pidfd a writer, up to 64: more writers (a job of many ranks, or a same-user process
  // forging segments of live pids) never cost the reader more descriptors; the ones past the
  // bound are checked through /proc, and their end is seen all the same.
  constexpr std::size_t count = 70;
  TempDir dir;
  ChildWriters writers(dir.path(), static_cast<int>(count));
  let_the_directory_settle();
  const std::size_t before = open_fds();
  auto reader = open_agent_segment_reader(dir.path());
  ASSERT_EQ(poll(*reader).allocators.size(), count);
  ASSERT_EQ(poll(*reader).allocators.size(), count);
  // The directory kept open, and at most 64 pidfds.
  EXPECT_LE(open_fds(), before + 1 + 64);
  ASSERT_TRUE(writers.end());
  EXPECT_TRUE(poll(*reader).allocators.empty()) << "every ended writer is seen as ended";
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(AgentSegment, RecycledPidIsDetectedByStartTime) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, sample_for(1));
  // Pretend the segment was written by an earlier process that had our pid.
  const int fd = ::open(writer->path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  format::SegmentHeader header{};
  ASSERT_EQ(::pread(fd, &header, sizeof(header), 0), static_cast<ssize_t>(sizeof(header)));
  ASSERT_NE(header.writer_start_ticks, 0U);
  header.writer_start_ticks += 1;
  ASSERT_EQ(::pwrite(fd, &header, sizeof(header), 0), static_cast<ssize_t>(sizeof(header)));
  ::close(fd);

  auto reader = open_agent_segment_reader(dir.path());
  EXPECT_TRUE(poll(*reader).allocators.empty());
  EXPECT_FALSE(fs::exists(writer->path()));
}

TEST(AgentSegment, ForeignGarbageAndTruncatedFilesAreIgnored) {
  TempDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, sample_for(77));
  std::ifstream in(writer->path(), std::ios::binary);
  const std::string valid((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(valid.size(), sizeof(format::SegmentHeader));

  const auto write_file = [&](const std::string& name, const std::string& bytes) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    ::chmod(path.c_str(), 0600);
    return path;
  };
  // Names below use pid 1 (alive, not ours) so that a file that wrongly passed validation
  // would be reported, not cleaned up as a dead writer's.
  std::mt19937_64 rng(7);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  write_file("agent-1.seg", noise);
  write_file("agent-2.seg", valid.substr(0, valid.size() / 2));
  write_file("agent-3.seg", valid.substr(0, 10));
  write_file("agent-4.seg", "");
  std::string wrong_pid = valid;  // header says our pid, name says another one
  write_file("agent-5.seg", wrong_pid);
  std::string huge_slots = valid;
  format::SegmentHeader header{};
  std::memcpy(&header, huge_slots.data(), sizeof(header));
  header.device_slots = 1'000'000;
  std::memcpy(huge_slots.data(), &header, sizeof(header));
  write_file("agent-6.seg", huge_slots);
  std::string bad_version = valid;
  std::memcpy(&header, valid.data(), sizeof(header));
  header.version = 99;
  std::memcpy(bad_version.data(), &header, sizeof(header));
  write_file("agent-7.seg", bad_version);
  const std::string foreign = write_file("agent-8.seg", valid);
  ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534) == 0 || ::geteuid() != 0, true);
  write_file("notes.txt", valid);
  write_file("agent-x.seg", valid);
  ASSERT_EQ(::mkdir((dir.path() + "/agent-9.seg").c_str(), 0700), 0);
  ASSERT_EQ(::mkfifo((dir.path() + "/agent-10.seg").c_str(), 0600), 0);
  const std::string outside = write_file("elsewhere", valid);
  ASSERT_EQ(::symlink(outside.c_str(), (dir.path() + "/agent-11.seg").c_str()), 0);

  auto reader = open_agent_segment_reader(dir.path());
  Polled out = poll(*reader);
  ASSERT_EQ(out.allocators.size(), 1U) << "only the real segment is read";
  EXPECT_EQ(out.allocators[0].allocated_bytes, 77U);
  const std::vector<std::string> warnings = reader->take_warnings();
  ASSERT_EQ(warnings.size(), 1U) << "only the file of another version is worth a warning";
  EXPECT_NE(warnings[0].find("agent-7.seg"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("v99"), std::string::npos) << warnings[0];
  EXPECT_TRUE(fs::exists(dir.path() + "/agent-1.seg")) << "invalid files are left alone";
}

TEST(AgentSegment, ReaderOfMissingDirectorySeesNothing) {
  auto reader = open_agent_segment_reader("/nonexistent/vramscope-test-dir");
  Polled out = poll(*reader);
  EXPECT_TRUE(out.allocators.empty());
}

TEST(SegmentDir, ParsesOnlyWellFormedNames) {
  EXPECT_EQ(format::parse_segment_file_name("agent-42.seg"), 42U);
  EXPECT_EQ(format::segment_file_name(42), "agent-42.seg");
  for (const char* bad :
       {"agent-.seg", "agent-0.seg", "agent--1.seg", "agent-+1.seg", "agent-1.seg.tmp",
        ".agent-1.tmp", "agent-99999999999.seg", "agent-1x.seg", "xagent-1.seg"}) {
    EXPECT_FALSE(format::parse_segment_file_name(bad).has_value()) << bad;
  }
}

TEST(SegmentDir, DefaultHonoursEnvironment) {
  ::setenv("VRAMSCOPE_SHM_DIR", "/some/where", 1);
  EXPECT_EQ(agent_segment_dir(), "/some/where");
  ::unsetenv("VRAMSCOPE_SHM_DIR");
  EXPECT_NE(agent_segment_dir().find("vramscope-" + std::to_string(::geteuid())),
            std::string::npos);
}

TEST(ProcessIdentity, StartTimeIdentifiesUs) {
  const std::optional<uint64_t> ticks = format::process_start_ticks(self_pid());
  ASSERT_TRUE(ticks.has_value());
  EXPECT_TRUE(format::process_is_alive(self_pid(), *ticks));
  EXPECT_FALSE(format::process_is_alive(self_pid(), *ticks + 1));
  EXPECT_NE(format::pid_namespace_inode(), 0U);
}

}  // namespace
}  // namespace vramscope
