// tests/cpp/cli/test_cli_diff.cpp -- `vramscope diff` end to end: exit codes for CI, same numbers
// as `show`
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "report/sample_fixtures.hpp"
#include "vramscope/format/recording.hpp"

namespace vramscope::testing {
namespace {

using nlohmann::json;

const std::map<std::string, std::optional<std::string>> no_nvml = {
    {"VRAMSCOPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}};

/// Writes a recording of 20 samples in which the trainer's driver use climbs to `peak_mib`.
void write_run(const std::string& path, uint32_t pid, uint64_t peak_mib) {
  RecordingMetadata metadata;
  metadata.hostname = "node-7";
  metadata.interval_ns = 100'000'000;
  const auto writer = RecordingWriter::create(path, metadata);
  SystemSample s = make_two_gpu_sample();
  s.devices[0].processes[0].pid = pid;
  s.allocators[0].pid = pid;
  s.allocators[0].rank = 0;
  for (uint64_t i = 1; i <= 20; ++i) {
    const uint64_t used_mib = peak_mib * i / 20;
    s.devices[0].processes[0].used_bytes = used_mib * mib;
    s.devices[0].used_bytes = (used_mib + 900) * mib;
    s.allocators[0].step = i;
    s.allocators[0].step_peak_allocated_bytes = used_mib / 2 * mib;
    writer->append(s);
    s.timestamp_ns += 100'000'000;
  }
  writer->close();
}

json run_json(const TempDir& dir, const std::vector<std::string>& args, int expected_exit) {
  const CliResult r = run_cli(dir, args, no_nvml);
  EXPECT_EQ(r.exit_code, expected_exit) << r.err;
  return json::parse(r.out);
}

TEST(CliDiff, FailsOnlyWhenAPeakGrowsPastTheThreshold) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  write_run(dir.file("a.vsrec"), 4021, 40000);
  write_run(dir.file("b.vsrec"), 6000, 44000);  // +10%, another pid
  const CliResult grew =
      run_cli(dir, {"diff", dir.file("a.vsrec"), dir.file("b.vsrec"), "--fail-if-peak-grows", "5%"},
              no_nvml);
  EXPECT_EQ(grew.exit_code, 4) << grew.err;
  EXPECT_NE(grew.out.find("Peaks that grew by more than 5%"), std::string::npos) << grew.out;
  EXPECT_NE(grew.out.find("rank 0: peak used grew"), std::string::npos) << grew.out;
  EXPECT_EQ(
      run_cli(dir,
              {"diff", dir.file("a.vsrec"), dir.file("b.vsrec"), "--fail-if-peak-grows", "11%"},
              no_nvml)
          .exit_code,
      0);
  EXPECT_EQ(
      run_cli(dir, {"diff", dir.file("b.vsrec"), dir.file("a.vsrec"), "--fail-if-peak-grows", "0"},
              no_nvml)
          .exit_code,
      0);
  EXPECT_EQ(run_cli(dir, {"diff", dir.file("a.vsrec"), dir.file("b.vsrec")}, no_nvml).exit_code, 0);
  const CliResult bad = run_cli(
      dir, {"diff", dir.file("a.vsrec"), dir.file("b.vsrec"), "--fail-if-peak-grows", "lots"},
      no_nvml);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_EQ(bad.out, "");
}

TEST(CliDiff, JsonNumbersAreShowsNumbers) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  write_run(dir.file("a.vsrec"), 4021, 40000);
  write_run(dir.file("b.vsrec"), 6000, 30000);
  const json diff = run_json(dir, {"diff", "--json", dir.file("a.vsrec"), dir.file("b.vsrec")}, 0);
  const json a = run_json(dir, {"show", "--json", dir.file("a.vsrec")}, 0);
  const json b = run_json(dir, {"show", "--json", dir.file("b.vsrec")}, 0);
  EXPECT_EQ(diff["devices"][0]["peak_used_bytes"]["a"], a["devices"][0]["peak_used_bytes"]);
  EXPECT_EQ(diff["devices"][0]["peak_used_bytes"]["b"], b["devices"][0]["peak_used_bytes"]);
  EXPECT_EQ(diff["devices"][0]["peak_used_bytes"]["delta"].get<int64_t>(),
            b["devices"][0]["peak_used_bytes"].get<int64_t>() -
                a["devices"][0]["peak_used_bytes"].get<int64_t>());
  json trainer;
  for (const json& p : diff["processes"]) {
    if (p["label"] == "rank 0") trainer = p;
  }
  ASSERT_FALSE(trainer.is_null()) << diff.dump(2);
  // show lists processes in pid order: the trainer is first in A (4021 < 5177), last in B.
  const json& in_a = a["processes"][0];
  const json& in_b = b["processes"][1];
  ASSERT_EQ(in_a["pid"], 4021);
  ASSERT_EQ(in_b["pid"], 6000);
  for (const char* key : {"peak_used_bytes", "torch_peak_allocated_bytes",
                          "torch_peak_reserved_bytes", "step_count"}) {
    EXPECT_EQ(trainer[key]["a"], in_a[key]) << key;
    EXPECT_EQ(trainer[key]["b"], in_b[key]) << key;
  }
  EXPECT_EQ(trainer["step_peak_max_bytes"]["a"], in_a["max_step_peak_allocated_bytes"]);
  EXPECT_EQ(trainer["step_peak_max_bytes"]["b"], in_b["max_step_peak_allocated_bytes"]);
  EXPECT_EQ(trainer["a"]["pid"], 4021);
  EXPECT_EQ(trainer["b"]["pid"], 6000);
}

TEST(CliDiff, ForeignFileIsAnErrorNamingIt) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  write_run(dir.file("a.vsrec"), 4021, 40000);
  const CliResult r = run_cli(dir, {"diff", dir.file("a.vsrec"), "/etc/hostname"}, no_nvml);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("/etc/hostname"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace vramscope::testing
