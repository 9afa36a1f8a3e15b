// tests/cpp/format/test_agent_segment_hostile.cpp -- forged and damaged agent segments
//
// Any process of the same user can write into a segment or replace it. Each case below forges
// what such a process could write and checks that every reader survives it: no hang, no crash,
// no implausible number passed on.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "format/temp_dir.hpp"
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
using format::SegmentHeader;

/// A fresh 0700 directory for segments.
class SegmentDir {
 public:
  SegmentDir() : m_path(m_temp.file("segments")) { ::mkdir(m_path.c_str(), 0700); }
  const std::string& path() const { return m_path; }

 private:
  testing::TempDir m_temp;
  std::string m_path;
};

using testing::poll;
using testing::Polled;

uint32_t self_pid() { return static_cast<uint32_t>(::getpid()); }

AllocatorSample plausible_sample() {
  AllocatorSample s;
  s.rank = 0;
  s.world_size = 1;
  s.cuda_device = 0;
  s.device_uuid = "GPU-1";
  s.allocated_bytes = 1000;
  s.reserved_bytes = 2000;
  return s;
}

/// Reads, edits and writes back the header of the segment at `path` (as an attacker would).
template <typename Edit>
void edit_header(const std::string& path, Edit edit) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  SegmentHeader header{};
  ASSERT_EQ(::pread(fd, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  edit(header);
  ASSERT_EQ(::pwrite(fd, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  ::close(fd);
}

/// Copies a valid segment to `agent-<pid>.seg` with a header edited by `edit`.
template <typename Edit>
std::string forge_copy(const std::string& dir, const std::string& valid_path, uint32_t pid,
                       Edit edit) {
  const std::string path = dir + "/" + format::segment_file_name(pid);
  testing::write_file(path, testing::read_file(valid_path));
  ::chmod(path.c_str(), 0600);
  edit_header(path, [&](SegmentHeader& header) {
    header.writer_pid = pid;
    edit(header);
  });
  return path;
}

TEST(HostileSegment, RingCounterAtTheTopOfItsRangeDoesNotHang) {
  SegmentDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, plausible_sample());
  StepRecord step;
  step.step = 1;
  writer->push_step(step);
  auto reader = open_agent_segment_reader(dir.path());
  ASSERT_EQ(poll(*reader).steps.size(), 1U);
  edit_header(writer->path(), [](SegmentHeader& header) {
    header.steps_written = UINT64_MAX;
    header.ooms_written = UINT64_MAX;
  });
  // Before the fix both polls looped forever: the alarm turns a hang into a failure.
  EXPECT_EXIT(
      {
        ::alarm(20);
        const Polled again = poll(*reader);
        auto fresh = open_agent_segment_reader(dir.path());
        const Polled first = poll(*fresh);
        const bool bounded = again.steps.size() <= format::segment_step_capacity &&
                             first.steps.size() <= format::segment_step_capacity &&
                             again.allocators.size() == 1 && first.allocators.size() == 1;
        ::_exit(bounded ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(HostileSegment, SegmentShrunkUnderAMappingIsDroppedNotRead) {
  SegmentDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, plausible_sample());
  auto reader = open_agent_segment_reader(dir.path());
  ASSERT_EQ(poll(*reader).allocators.size(), 1U);
  const off_t full_size = static_cast<off_t>(fs::file_size(writer->path()));

  // Before the fix the reader touched pages past the new end: SIGBUS killed the test.
  for (const off_t size : {off_t{0}, static_cast<off_t>(sizeof(SegmentHeader)), full_size / 2}) {
    ASSERT_EQ(::truncate(writer->path().c_str(), size), 0);
    EXPECT_TRUE(poll(*reader).allocators.empty()) << "size " << size;
  }
  // Grown back to its size, the file is zeros past the header: invalid, still skipped.
  ASSERT_EQ(::truncate(writer->path().c_str(), full_size), 0);
  EXPECT_TRUE(poll(*reader).allocators.empty());
}

TEST(HostileSegment, ImplausibleNumbersAreSkippedRecordByRecord) {
  SegmentDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 4, dir.path());
  writer->publish(0, plausible_sample());
  AllocatorSample huge = plausible_sample();
  huge.allocated_bytes = UINT64_MAX;
  writer->publish(1, huge);
  AllocatorSample far_device = plausible_sample();
  far_device.cuda_device = INT32_MAX;
  writer->publish(2, far_device);
  AllocatorSample bad_rank = plausible_sample();
  bad_rank.rank = -7;
  writer->publish(3, bad_rank);

  StepRecord good_step;
  good_step.step = 1;
  good_step.peak_reserved_bytes = 4096;
  writer->push_step(good_step);
  StepRecord bad_step = good_step;
  bad_step.step = 2;
  bad_step.peak_reserved_bytes = UINT64_MAX;
  writer->push_step(bad_step);
  StepRecord negative_step = good_step;
  negative_step.step = 3;
  negative_step.duration_ns = -1;
  writer->push_step(negative_step);

  OomRecord good_oom;
  good_oom.requested_bytes = UINT64_MAX;  // absurd requests are why OOMs happen
  good_oom.device_total_bytes = 80ULL << 30U;
  writer->push_oom(good_oom);
  OomRecord bad_oom = good_oom;
  bad_oom.cuda_device = -3;
  writer->push_oom(bad_oom);

  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  ASSERT_EQ(out.allocators.size(), 1U);
  EXPECT_EQ(out.allocators[0].allocated_bytes, 1000U);
  ASSERT_EQ(out.steps.size(), 1U);
  EXPECT_EQ(out.steps[0].step, 1U);
  ASSERT_EQ(out.ooms.size(), 1U);
  EXPECT_EQ(out.ooms[0].requested_bytes, UINT64_MAX);
}

TEST(HostileSegment, PidsNoProcessCanHaveAreNeverAlive) {
  SegmentDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, plausible_sample());
  // 2^32-1 is -1 as a pid_t: kill(-1, 0) succeeds whenever we may signal anything.
  for (const uint32_t pid : {UINT32_MAX, format::max_pid(), uint32_t{1} << 31U}) {
    forge_copy(dir.path(), writer->path(), pid, [](SegmentHeader& header) {
      header.writer_start_ticks = 0;  // "unknown": only existence would be checked
    });
  }
  auto reader = open_agent_segment_reader(dir.path());
  const Polled out = poll(*reader);
  ASSERT_EQ(out.allocators.size(), 1U) << "only the real writer is alive";
  EXPECT_EQ(out.allocators[0].pid, self_pid());
  EXPECT_FALSE(fs::exists(dir.path() + "/" + format::segment_file_name(UINT32_MAX)))
      << "a segment of an impossible pid is a dead writer's, removed";

  EXPECT_FALSE(format::process_is_alive(0, 0));
  EXPECT_FALSE(format::process_is_alive(UINT32_MAX, 0));
  EXPECT_FALSE(format::process_is_alive(format::max_pid(), 0));
  EXPECT_TRUE(format::process_is_alive(self_pid(), 0));
}

TEST(HostileSegment, ForeignNamespaceHeartbeatInTheFutureIsStale) {
  SegmentDir dir;
  auto writer = open_agent_segment_writer(self_pid(), 1, dir.path());
  writer->publish(0, plausible_sample());
  const uint64_t own_namespace = format::pid_namespace_inode();
  ASSERT_NE(own_namespace, 0U);
  // Pids 2, 3, 4 in another namespace: judged by heartbeat alone.
  SegmentHeader valid{};
  {
    const int fd = ::open(writer->path().c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pread(fd, &valid, sizeof valid, 0), static_cast<ssize_t>(sizeof valid));
    ::close(fd);
  }
  const auto foreign = [&](uint32_t pid, int64_t heartbeat_ns) {
    forge_copy(dir.path(), writer->path(), pid, [&](SegmentHeader& header) {
      header.pid_namespace_inode = own_namespace + 1;
      header.heartbeat_ns = heartbeat_ns;
    });
  };
  foreign(2, valid.heartbeat_ns);                      // fresh: reported
  foreign(3, INT64_MAX);                               // never ages: stale
  foreign(4, INT64_MIN);                               // overflowed the distance before the fix
  foreign(5, valid.heartbeat_ns + 3'600'000'000'000);  // an hour ahead

  auto reader = open_agent_segment_reader(dir.path());
  std::vector<uint32_t> pids;
  for (const AllocatorSample& a : poll(*reader).allocators) pids.push_back(a.pid);
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<uint32_t>{2, self_pid()}));
  EXPECT_TRUE(fs::exists(dir.path() + "/agent-3.seg")) << "stale foreign segments stay in place";
}

TEST(HostileSegment, APreCreatedDirectoryIsRefusedLoudlyWithTheWayOut) {
  testing::TempDir parent;
  // Someone got there first: a directory everyone may write (or, when we are root and can show
  // it, one owned by another user) in place of ours.
  const std::string planted = parent.file("vramscope-1000");
  ASSERT_EQ(::mkdir(planted.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 0777), 0);
  std::vector<std::string> dirs = {planted};
  if (::geteuid() == 0) {
    const std::string foreign = parent.file("foreign");
    ASSERT_EQ(::mkdir(foreign.c_str(), 0700), 0);
    ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534), 0);
    dirs.push_back(foreign);
  }
  for (const std::string& dir : dirs) {
    try {
      open_agent_segment_writer(self_pid(), 1, dir);
      ADD_FAILURE() << "the writer used " << dir;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("VRAMSCOPE_SHM_DIR"), std::string::npos)
          << error.what();
    }
    // The monitor says so too (once), instead of silently showing no agents.
    auto reader = open_agent_segment_reader(dir);
    EXPECT_TRUE(poll(*reader).allocators.empty());
    const std::vector<std::string> warnings = reader->take_warnings();
    ASSERT_EQ(warnings.size(), 1U) << dir;
    EXPECT_NE(warnings[0].find("VRAMSCOPE_SHM_DIR"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(dir), std::string::npos) << warnings[0];
    poll(*reader);
    EXPECT_TRUE(reader->take_warnings().empty()) << "said once, not on every poll";
  }
  auto missing = open_agent_segment_reader(parent.file("not-yet"));
  poll(*missing);
  EXPECT_TRUE(missing->take_warnings().empty()) << "no agent has started yet: nothing to say";
}

TEST(HostileSegment, TheSegmentDirectoryIsMadeOwnerOnly) {
  testing::TempDir parent;
  // Ours, but listable by everyone: the pids of every monitored process were visible.
  const std::string dir = parent.file("segments");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  auto writer = open_agent_segment_writer(self_pid(), 1, dir);
  struct stat info {};
  ASSERT_EQ(::stat(dir.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700U);
}

}  // namespace
}  // namespace vramscope
