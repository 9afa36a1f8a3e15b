// tests/cpp/cli/test_cli_snapshot.cpp -- `vramscope` through the real binary and the NVML double
//
// Goldens live in tests/data/golden/cli/ with <TIME>, <TIMESTAMP_NS> and <HOSTNAME> standing for
// what changes between runs; regenerate with VRAMSCOPE_UPDATE_GOLDENS=1 ctest -R CliSnapshot.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli_runner.hpp"
#include "golden.hpp"
#include "vramscope/sampler.hpp"

namespace vramscope::testing {
namespace {

using nlohmann::ordered_json;

std::string normalize_table(const std::string& text) {
  std::string out =
      std::regex_replace(text, std::regex("^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d"), "<TIME>");
  return replace_all(out, "  host " + local_hostname() + "\n", "  host <HOSTNAME>\n");
}

std::string normalize_json(const std::string& text) {
  ordered_json doc = ordered_json::parse(text);
  doc["timestamp_ns"] = "<TIMESTAMP_NS>";
  doc["hostname"] = "<HOSTNAME>";
  return doc.dump(2) + "\n";
}

std::string normalize_csv(const std::string& text) {
  return std::regex_replace(text, std::regex("\n\\d+," + local_hostname() + ","),
                            "\n<TIMESTAMP_NS>,<HOSTNAME>,");
}

TEST(CliSnapshot, TableMatchesGolden) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r = run_cli(dir, {}, double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  expect_golden("cli/two_gpus_table.txt", normalize_table(r.out));
  // Never colour into a file, and the MiB numbers are nvidia-smi's (floor of bytes / 2^20).
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_NE(r.out.find("79360MiB"), std::string::npos);  // 83214991360 bytes
}

TEST(CliSnapshot, HumanUnitsTableMatchesGolden) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r = run_cli(dir, {"--units", "human"}, double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("cli/two_gpus_table_human.txt", normalize_table(r.out));
}

TEST(CliSnapshot, JsonMatchesGolden) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r = run_cli(dir, {"--json"}, double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("cli/two_gpus.json", normalize_json(r.out));
}

TEST(CliSnapshot, CsvMatchesGolden) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult devices = run_cli(dir, {"--csv"}, double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  expect_golden("cli/two_gpus_devices.csv", normalize_csv(devices.out));
  const CliResult processes =
      run_cli(dir, {"--csv", "--processes"}, double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(processes.exit_code, 0) << processes.err;
  expect_golden("cli/two_gpus_processes.csv", normalize_csv(processes.out));
}

TEST(CliSnapshot, MigAndLostGpuMatchGoldens) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult mig = run_cli(dir, {}, double_env(nvml_script("mig.json")));
  ASSERT_EQ(mig.exit_code, 0) << mig.err;
  expect_golden("cli/mig_table.txt", normalize_table(mig.out));
  // One GPU lost, the other still reported: not a failure.
  const CliResult lost = run_cli(dir, {}, double_env(nvml_script("lost_gpu.json")));
  EXPECT_EQ(lost.exit_code, 0) << lost.err;
  expect_golden("cli/lost_gpu_table.txt", normalize_table(lost.out));
  const CliResult lost_json = run_cli(dir, {"--json"}, double_env(nvml_script("lost_gpu.json")));
  expect_golden("cli/lost_gpu.json", normalize_json(lost_json.out));
}

TEST(CliSnapshot, EveryLineFitsEightyColumnsForEightGpus) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r = run_cli(dir, {}, double_env(nvml_script("eight_gpus_64_procs.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 80U) << line;
    ++count;
  }
  EXPECT_GT(count, 64);
}

TEST(CliSnapshot, EveryGpuLostExitsOne) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r = run_cli(dir, {}, double_env(test_data_dir() + "/cli/all_lost.json"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("GPU lost"), std::string::npos);
}

TEST(CliSnapshot, DriverNotLoadedAndNoGpuExitThree) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult not_loaded =
      run_cli(dir, {"--json"}, double_env(test_data_dir() + "/cli/driver_not_loaded.json"));
  EXPECT_EQ(not_loaded.exit_code, 3);
  EXPECT_EQ(not_loaded.out, "");
  EXPECT_NE(not_loaded.err.find("driver not loaded"), std::string::npos) << not_loaded.err;
  const CliResult no_gpu = run_cli(dir, {}, double_env(test_data_dir() + "/cli/no_gpus.json"));
  EXPECT_EQ(no_gpu.exit_code, 3);
  EXPECT_NE(no_gpu.err.find("no GPU"), std::string::npos) << no_gpu.err;
}

TEST(CliSnapshot, ColourFollowsTheFlagAndNoColor) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  auto env = double_env(nvml_script("two_gpus.json"));
  EXPECT_NE(run_cli(dir, {"--color", "always"}, env).out.find("\x1b["), std::string::npos);
  EXPECT_EQ(run_cli(dir, {"--color", "never"}, env).out.find('\x1b'), std::string::npos);
  // auto: stdout here is a file, so no colour even with a colour terminal declared.
  env["TERM"] = "xterm-256color";
  EXPECT_EQ(run_cli(dir, {}, env).out.find('\x1b'), std::string::npos);
}

TEST(CliSnapshot, AgentJoinsTheDriverRowEndToEnd) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  OneGpuTrainer trainer(dir);
  ASSERT_GT(trainer.pid(), 0);
  const uint64_t mib = OneGpuTrainer::mib;
  trainer.publish();

  const auto& env = trainer.env();
  const CliResult table = run_cli(dir, {}, env);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("sleep 600"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("torch: alloc 20480MiB  reserved 24576MiB  non-PyTorch 5424MiB"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("Process Used = non-PyTorch"), std::string::npos);

  const CliResult json = run_cli(dir, {"--json"}, env);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const ordered_json doc = ordered_json::parse(json.out);
  const ordered_json& process = doc["devices"][0]["processes"][0];
  EXPECT_EQ(process["pid"], trainer.pid());
  EXPECT_EQ(process["visible"], true);
  EXPECT_EQ(process["command"], "sleep 600");
  EXPECT_EQ(process["torch"]["allocated_bytes"], 20480 * mib);
  EXPECT_EQ(process["torch"]["non_pytorch_bytes"], 5424 * mib);
  ASSERT_EQ(doc["allocators"].size(), 1U);

  // --no-agents: the driver's view only.
  const CliResult driver_only = run_cli(dir, {"--json", "--no-agents"}, env);
  EXPECT_EQ(ordered_json::parse(driver_only.out)["allocators"].size(), 0U);
}

}  // namespace
}  // namespace vramscope::testing
