// tests/cpp/backends/test_proc_info.cpp -- /proc resolution of pids, on this process and a fake tree
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "vramscope/backends/proc_info.hpp"

namespace vramscope {
namespace {

namespace fs = std::filesystem;

TEST(ProcInfo, OwnProcess) {
  const auto pid = static_cast<uint32_t>(getpid());
  const ProcIdentity identity = read_proc_identity(pid);
  EXPECT_TRUE(identity.visible);
  EXPECT_EQ(identity.uid, getuid());
  EXPECT_NE(identity.command.find("test_backends"), std::string::npos) << identity.command;
  EXPECT_GT(identity.start_ticks, 0U);
  EXPECT_EQ(read_start_ticks(pid), identity.start_ticks);
}

TEST(ProcInfo, PidAbovePidMaxIsNotVisible) {
  const ProcIdentity identity = read_proc_identity(90000001U);
  EXPECT_FALSE(identity.visible);
  EXPECT_FALSE(identity.uid.has_value());
  EXPECT_EQ(identity.command, "");
  EXPECT_FALSE(read_start_ticks(90000001U).has_value());
}

TEST(ProcInfo, UnknownUidIsShownAsNumber) { EXPECT_EQ(user_name_of(3999999999U), "3999999999"); }

/// A fake /proc with one process whose files the test writes.
class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    m_root = ::testing::TempDir() + "fake_proc_" + std::to_string(getpid());
    fs::remove_all(m_root);
    fs::create_directories(m_root);
  }
  void TearDown() override { fs::remove_all(m_root); }

  void write_process(uint32_t pid, const std::string& comm, uint64_t start_ticks,
                     const std::string& cmdline, uint32_t uid = 0) {
    const fs::path dir = fs::path(m_root) / std::to_string(pid);
    fs::create_directories(dir);
    // Fields 3..21 are filler; field 22 is the start time.
    std::ofstream(dir / "stat") << pid << " (" << comm
                                << ") S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
                                << start_ticks << " 999 888\n";
    std::ofstream(dir / "status") << "Name:\t" << comm << "\nUmask:\t0022\nUid:\t" << uid << "\t"
                                  << uid << "\t0\t0\nGid:\t0\t0\t0\t0\n";
    std::ofstream(dir / "cmdline", std::ios::binary) << cmdline;
  }

  std::string m_root;
};

TEST_F(FakeProc, ParsesCommWithSpacesAndParentheses) {
  write_process(42, "my (odd) name", 123456,
                std::string("python\0train.py\0--lr\0"
                            "0.1\0",
                            25),
                0);
  const ProcIdentity identity = read_proc_identity(42, m_root);
  EXPECT_TRUE(identity.visible);
  EXPECT_EQ(identity.start_ticks, 123456U);
  EXPECT_EQ(identity.uid, 0U);
  EXPECT_EQ(identity.command, "python train.py --lr 0.1");
}

TEST_F(FakeProc, EmptyCmdlineShowsComm) {
  write_process(7, "kworker/0:1", 5, "");
  EXPECT_EQ(read_proc_identity(7, m_root).command, "[kworker/0:1]");
}

TEST_F(FakeProc, LongCmdlineIsCut) {
  write_process(8, "x", 5, std::string(3 * max_command_bytes, 'a'));
  EXPECT_EQ(read_proc_identity(8, m_root).command.size(), max_command_bytes);
}

TEST_F(FakeProc, MalformedStatIsNotVisible) {
  fs::create_directories(fs::path(m_root) / "9");
  std::ofstream(fs::path(m_root) / "9" / "stat") << "9 no parenthesis";
  EXPECT_FALSE(read_proc_identity(9, m_root).visible);
}

TEST_F(FakeProc, CacheRereadsOnlyWhenThePidWasReused) {
  write_process(42, "first", 100, std::string("first\0", 6));
  ProcCache cache(/*revalidate_ns=*/10, m_root);
  ProcessSample process;
  process.pid = 42;

  cache.begin_sample(0);
  cache.resolve(process);
  cache.end_sample();
  EXPECT_EQ(process.command, "first");
  EXPECT_EQ(cache.full_reads(), 1U);

  // Same process, revalidated (start time unchanged): no full read.
  cache.begin_sample(100);
  cache.resolve(process);
  cache.end_sample();
  EXPECT_EQ(cache.full_reads(), 1U);

  // The pid now names another process (new start time): read again.
  write_process(42, "second", 200, std::string("second\0", 7));
  cache.begin_sample(105);  // within revalidate_ns: still trusted
  cache.resolve(process);
  cache.end_sample();
  EXPECT_EQ(process.command, "first");
  cache.begin_sample(200);
  cache.resolve(process);
  cache.end_sample();
  EXPECT_EQ(process.command, "second");
  EXPECT_EQ(cache.full_reads(), 2U);
}

TEST_F(FakeProc, CacheForgetsPidsAbsentFromASample) {
  write_process(42, "a", 100, std::string("a\0", 2));
  ProcCache cache(1'000'000'000, m_root);
  ProcessSample process;
  process.pid = 42;
  cache.begin_sample(0);
  cache.resolve(process);
  cache.end_sample();
  cache.begin_sample(1);  // pid 42 not in this sample
  cache.end_sample();
  write_process(42, "b", 300, std::string("b\0", 2));
  cache.begin_sample(2);
  cache.resolve(process);
  cache.end_sample();
  EXPECT_EQ(process.command, "b");
  EXPECT_EQ(cache.full_reads(), 2U);
}

TEST_F(FakeProc, CacheNoticesAProcessThatDisappeared) {
  write_process(42, "a", 100, std::string("a\0", 2));
  ProcCache cache(0, m_root);
  ProcessSample process;
  process.pid = 42;
  cache.begin_sample(0);
  cache.resolve(process);
  cache.end_sample();
  EXPECT_TRUE(process.visible);
  fs::remove_all(fs::path(m_root) / "42");
  cache.begin_sample(1);
  cache.resolve(process);
  cache.end_sample();
  EXPECT_FALSE(process.visible);
  EXPECT_EQ(process.command, "");
}

}  // namespace
}  // namespace vramscope
