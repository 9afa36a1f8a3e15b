// tests/cpp/cli/test_cli_watch.cpp -- `vramscope watch`: counts, formats, pipes that close early
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli_runner.hpp"
#include "golden.hpp"

namespace vramscope::testing {
namespace {

std::vector<std::string> lines_of(const std::string& text, char end = '\n') {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line, end);) lines.push_back(line);
  return lines;
}

TEST(CliWatch, JsonlGivesOneDocumentPerLinePerSample) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r =
      run_cli(dir, {"watch", "--count", "3", "--interval", "10ms", "--format", "jsonl"},
              double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3U) << r.out;
  std::vector<int64_t> timestamps_ns;
  for (const std::string& line : lines) {
    const nlohmann::json doc = nlohmann::json::parse(line);
    EXPECT_EQ(doc["schema_version"], 1);
    EXPECT_EQ(doc["devices"].size(), 2U);
    timestamps_ns.push_back(doc["timestamp_ns"].get<int64_t>());
    if (timestamps_ns.size() > 1) {
      EXPECT_GT(timestamps_ns.back(), timestamps_ns[timestamps_ns.size() - 2]);
    }
  }
  // Absolute deadlines promise that sample k is taken no earlier than start + k * interval, not
  // that consecutive samples are an interval apart: a late sample is followed by an early one.
  // The start precedes sample 0 by that sample's own latency, allowed here up to one interval.
  const int64_t interval_ns = 10'000'000;
  EXPECT_GE(timestamps_ns.back() - timestamps_ns.front(), (2 - 1) * interval_ns);
}

TEST(CliWatch, CsvPrintsTheHeaderOnce) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r = run_cli(dir, {"watch", "-n", "2", "-i", "1ms", "-f", "csv"},
                              double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1U + 2U * 2U) << r.out;
  EXPECT_EQ(lines[0].rfind("timestamp_ns,hostname,index,", 0), 0U);
  for (std::size_t i = 1; i < lines.size(); ++i)
    EXPECT_NE(lines[i].find(",NVIDIA H200,"), std::string::npos);
}

TEST(CliWatch, TableIsOneLinePerGpuPerSample) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r =
      run_cli(dir, {"watch", "-n", "2", "-i", "1ms"}, double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4U) << r.out;
  const std::regex shape(R"(\d\d:\d\d:\d\d\.\d{3}  gpu [01]  used \d+MiB  free \d+MiB)");
  for (const std::string& line : lines) EXPECT_TRUE(std::regex_match(line, shape)) << line;
  EXPECT_NE(lines[0].find("gpu 0  used 79360MiB  free 63883MiB"), std::string::npos);
}

TEST(CliWatch, EndsQuietlyWhenTheReaderGoesAway) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  // No --count: only the closed pipe can end it.
  const pid_t pid = spawn_cli(dir, {"watch", "-i", "5ms", "-f", "jsonl"},
                              double_env(nvml_script("two_gpus.json")), fds[1]);
  close(fds[1]);
  ASSERT_GT(pid, 0);
  char first = 0;
  ASSERT_EQ(read(fds[0], &first, 1), 1);  // it is streaming
  EXPECT_EQ(first, '{');
  close(fds[0]);
  EXPECT_EQ(wait_exit_code(pid), 0);
  EXPECT_EQ(read_text_file(dir.file(".stderr")), "");
}

}  // namespace
}  // namespace vramscope::testing
