// tests/cpp/cli/test_cli_record.cpp -- `vramscope record` and `vramscope show` end to end
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cli_runner.hpp"
#include "golden.hpp"
#include "vramscope/format/packed_chunk.hpp"
#include "vramscope/format/recording.hpp"
#include "vramscope/format/recording_layout.hpp"

namespace vramscope::testing {
namespace {

using nlohmann::json;

json show_json(const TempDir& dir, const std::string& file) {
  const CliResult r = run_cli(dir, {"show", "--json", file},
                              {{"VRAMSCOPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(CliRecord, CommandExitStatusIsReturnedAndShowReadsTheFile) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("run.vsrec");
  const CliResult r =
      run_cli(dir, {"record", "-o", file, "-i", "10ms", "--", "/bin/sh", "-c", "exit 7"},
              double_env(nvml_script("two_gpus.json")));
  EXPECT_EQ(r.exit_code, 7) << r.err;
  struct stat info {};
  ASSERT_EQ(stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777U, 0600U);

  const json summary = show_json(dir, file);
  EXPECT_EQ(summary["command"], "/bin/sh -c 'exit 7'");
  EXPECT_GE(summary["sample_count"].get<int>(), 1);
  EXPECT_EQ(summary["tail"]["state"], "clean");
  EXPECT_EQ(summary["interval_ns"], 10'000'000);
  ASSERT_EQ(summary["devices"].size(), 2U);
  EXPECT_EQ(summary["devices"][0]["peak_used_bytes"], 83214991360ULL);
  EXPECT_EQ(summary["processes"].size(), 4U);

  // The text summary works without any NVML and says the same.
  const CliResult text =
      run_cli(dir, {"show", file}, {{"VRAMSCOPE_NVML_LIBRARY", "/nonexistent.so"}});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Tail      clean"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("79360MiB"), std::string::npos) << text.out;
}

TEST(CliRecord, KilledCommandGivesOneHundredTwentyEightPlusSignal) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const CliResult r =
      run_cli(dir, {"record", "-o", dir.file("k.vsrec"), "--", "/bin/sh", "-c", "kill -TERM $$"},
              double_env(nvml_script("two_gpus.json")));
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
}

TEST(CliRecord, InterruptSentToTheRecorderReachesTheCommand) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  // The command interrupts its recorder (as `kill -INT` from elsewhere would): the recorder
  // passes SIGINT on, keeps recording until the command ends, and returns its status.
  const CliResult r = run_cli(dir,
                              {"record", "-o", dir.file("i.vsrec"), "-i", "5ms", "--", "/bin/sh",
                               "-c", "kill -INT $PPID; exec sleep 30"},
                              double_env(nvml_script("two_gpus.json")));
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.err;
  EXPECT_EQ(show_json(dir, dir.file("i.vsrec"))["tail"]["state"], "clean");
}

TEST(CliRecord, DurationBoundsTheRecording) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("d.vsrec");
  const CliResult r = run_cli(dir, {"record", "-o", file, "-i", "20ms", "--duration", "200ms"},
                              double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json summary = show_json(dir, file);
  // 200 ms at 20 ms: ten samples on the grid; allow a slow machine to miss some ticks.
  EXPECT_GE(summary["sample_count"].get<int>(), 3);
  EXPECT_LE(summary["sample_count"].get<int>(), 10);
  EXPECT_LT(summary["duration_ns"].get<int64_t>(), 200'000'000);
  EXPECT_EQ(summary["command"], nullptr);
  // Off a terminal there is no status line: success is still said, with the count kept.
  EXPECT_EQ(r.err, "vramscope: wrote " + std::to_string(summary["sample_count"].get<int>()) +
                       " samples to " + file + "\n");
}

TEST(CliRecord, RefusesToOverwriteWithoutForce) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("keep.vsrec");
  std::ofstream(file) << "precious";
  const auto env = double_env(nvml_script("two_gpus.json"));
  const CliResult refused =
      run_cli(dir, {"record", "-o", file, "--duration", "10ms", "--", "true"}, env);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(read_text_file(file), "precious");
  const CliResult forced =
      run_cli(dir, {"record", "-o", file, "--force", "--duration", "10ms"}, env);
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_GE(show_json(dir, file)["sample_count"].get<int>(), 1);
}

TEST(CliRecord, UnknownCommandExits127AndLeavesNoFile) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("none.vsrec");
  const CliResult r = run_cli(dir, {"record", "-o", file, "--", "vramscope-no-such-command-xyz"},
                              double_env(nvml_script("two_gpus.json")));
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("vramscope-no-such-command-xyz"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST(CliRecord, SigtermStopsARecordingWithoutCommandCleanly) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("t.vsrec");
  const int out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = spawn_cli(dir, {"record", "-o", file, "-i", "5ms"},
                              double_env(nvml_script("two_gpus.json")), out_fd);
  close(out_fd);
  ASSERT_GT(pid, 0);
  // Wait (bounded) until a first chunk reached the file: the recorder is in its loop.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const uintmax_t header_only = 0;
  uintmax_t first_size = header_only;
  while (std::chrono::steady_clock::now() < give_up) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(file, error);
    if (!error && first_size == header_only) first_size = size;
    if (!error && size > first_size) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit_code(pid), 0) << read_text_file(dir.file(".stderr"));
  const json summary = show_json(dir, file);
  EXPECT_EQ(summary["tail"]["state"], "clean");
  EXPECT_GE(summary["sample_count"].get<int>(), 1);
}

TEST(CliRecord, MaxSizeRotatesAndKeepsTheNewestFiles) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("long.vsrec");
  // A symlink planted where a rotated file will go, pointing at a file that must stay intact.
  const std::string victim = dir.file("victim.txt");
  std::ofstream(victim) << "precious";
  ASSERT_EQ(::symlink(victim.c_str(), (file + ".1").c_str()), 0);
  // Recording lasts as long as the command, which waits until a second rotation happened (the
  // planted link reaches FILE.2 at the first, a recording at the second) and
  // the new FILE holds a flushed chunk (a fixed duration rotated too rarely on a loaded machine).
  // It gives up, exiting 1, after about a minute.
  const std::string wait_for_rotations =
      "f=\"$0\"; n=0; "
      "until [ -f \"$f.2\" ] && [ ! -h \"$f.2\" ]; do n=$((n+1)); [ $n -gt 6000 ] && exit 1; sleep "
      "0.01; done; "
      "s=$(stat -c %s \"$f\"); "
      "while [ \"$(stat -c %s \"$f\" 2>/dev/null || echo 0)\" -le \"$s\" ]; do "
      "n=$((n+1)); [ $n -gt 12000 ] && exit 1; sleep 0.01; done";
  const CliResult r = run_cli(dir,
                              {"record", "-o", file, "-i", "5ms", "--max-size", "1KiB", "--rotate",
                               "2", "--", "sh", "-c", wait_for_rotations, file},
                              double_env(nvml_script("two_gpus.json")));
  ASSERT_EQ(r.exit_code, 0) << "no second rotation within a minute\n" << r.err;
  EXPECT_EQ(read_text_file(victim), "precious");
  int samples = 0;
  for (const std::string& name : {file, file + ".1", file + ".2"}) {
    struct stat info {};
    ASSERT_EQ(::lstat(name.c_str(), &info), 0) << name;
    EXPECT_TRUE(S_ISREG(info.st_mode)) << name << " (the planted link was rotated away)";
    EXPECT_EQ(info.st_mode & 0777, 0600U) << name;
    const json summary = show_json(dir, name);
    EXPECT_EQ(summary["tail"]["state"], "clean") << name;
    samples += summary["sample_count"].get<int>();
  }
  EXPECT_GT(samples, 3);
  struct stat info {};
  EXPECT_NE(::lstat((file + ".3").c_str(), &info), 0) << "only --rotate 2 files are kept";
  // The rotated files are the older ones: FILE.2 ends before FILE.1 starts, FILE.1 before FILE.
  const auto span = [&](const std::string& name) {
    const json s = show_json(dir, name);
    return std::pair{s["start_ns"].get<int64_t>(), s["end_ns"].get<int64_t>()};
  };
  EXPECT_LE(span(file + ".2").second, span(file + ".1").first);
  EXPECT_LE(span(file + ".1").second, span(file).first);
}

TEST(CliRecord, ChunksHoldUpToASecondOfSamplesAndAKillKeepsEveryClosedOne) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("killed.vsrec");
  const int out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const pid_t pid = spawn_cli(dir, {"record", "-o", file, "-i", "50ms"},
                              double_env(nvml_script("two_gpus.json")), out_fd);
  close(out_fd);
  ASSERT_GT(pid, 0);
  // Wait (bounded) until two chunks reached the file, then kill the recorder where it stands.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  uintmax_t last_size = 0;
  int growths = 0;
  while (growths < 3 && std::chrono::steady_clock::now() < give_up) {
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(file, error);
    if (!error && size != last_size) {
      ++growths;  // the header, then each chunk
      last_size = size;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit_code(pid), 128 + SIGKILL);
  ASSERT_EQ(growths, 3) << "no two chunks within 30 s";

  // The chunks on disk, walked by their headers: samples in each.
  std::ifstream in(file, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  format::FileHeader header{};
  ASSERT_GE(bytes.size(), sizeof header);
  std::memcpy(&header, bytes.data(), sizeof header);
  std::vector<uint32_t> chunk_samples;
  for (uint64_t at = header.header_bytes; at < bytes.size();) {
    format::PackedChunkHeader chunk;
    std::string why;
    if (format::parse_packed_header(std::string_view(bytes).substr(at), chunk, why) !=
            format::PackedHeaderStatus::Ok ||
        bytes.size() - at < chunk.header_bytes + uint64_t{chunk.stored_bytes}) {
      break;  // the chunk being written when the recorder died
    }
    chunk_samples.push_back(chunk.sample_count);
    at += chunk.header_bytes + uint64_t{chunk.stored_bytes};
  }
  const auto reader = RecordingReader::open_bytes(bytes);
  std::vector<SystemSample> samples;
  for (SystemSample sample; reader->next(sample);) samples.push_back(sample);
  EXPECT_NE(reader->tail_state(), TailState::Corrupt) << reader->tail_message();
  // Every closed chunk reads back; each holds what came in less than a second (samples are
  // taken late on a loaded machine: twice that is allowed), many samples at 50 ms, where one
  // chunk every 100 ms held two.
  ASSERT_GE(chunk_samples.size(), 2U);
  std::size_t first = 0;
  for (const uint32_t count : chunk_samples) {
    ASSERT_LE(first + count, samples.size());
    EXPECT_LT(samples[first + count - 1].timestamp_ns - samples[first].timestamp_ns,
              2 * record_chunk_window_ns);
    first += count;
  }
  EXPECT_EQ(first, samples.size());
  EXPECT_GE(samples.size(), 5 * chunk_samples.size());
}

TEST(CliRecord, RotateNeedsMaxSizeAndASaneSize) {
  TempDir dir;
  const auto env = double_env(nvml_script("two_gpus.json"));
  EXPECT_NE(run_cli(dir, {"record", "-o", dir.file("a.vsrec"), "--rotate", "3"}, env).exit_code, 0);
  const CliResult tiny =
      run_cli(dir, {"record", "-o", dir.file("b.vsrec"), "--max-size", "100"}, env);
  EXPECT_NE(tiny.exit_code, 0);
  EXPECT_NE(tiny.err.find("--max-size"), std::string::npos) << tiny.err;
}

TEST(CliShow, TruncatedFileWarnsButSucceeds) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("cut.vsrec");
  ASSERT_EQ(run_cli(dir, {"record", "-o", file, "-i", "5ms", "--duration", "100ms"},
                    double_env(nvml_script("two_gpus.json")))
                .exit_code,
            0);
  const json whole = show_json(dir, file);
  // The file ends with an index chunk (format 3), whose trailer holds its size (u32, "VSIX").
  uint32_t index_bytes = 0;
  {
    std::ifstream in(file, std::ios::binary);
    in.seekg(-8, std::ios::end);
    in.read(reinterpret_cast<char*>(&index_bytes), sizeof index_bytes);
  }
  ASSERT_GT(index_bytes, 8U);
  const uint64_t size = std::filesystem::file_size(file);
  // Cutting into it loses no sample...
  std::filesystem::resize_file(file, size - 7);
  const json index_cut = show_json(dir, file);
  EXPECT_EQ(index_cut["tail"]["state"], "truncated");
  EXPECT_EQ(index_cut["sample_count"], whole["sample_count"]);
  // ...cutting past it, into the last sample chunk, loses that chunk.
  std::filesystem::resize_file(file, size - index_bytes - 3);

  const CliResult r = run_cli(dir, {"show", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Tail      truncated"), std::string::npos) << r.out;
  const json cut = show_json(dir, file);
  EXPECT_EQ(cut["tail"]["state"], "truncated");
  EXPECT_TRUE(cut["tail"]["message"].is_string());
  EXPECT_LT(cut["sample_count"].get<int>(), whole["sample_count"].get<int>());
}

TEST(CliTop, OnceOfAReplayShowsTheRecordingsPeakWithoutKeyHints) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  // The bundled H200 recording (tools/main.sh replays it): its first sample shows nothing
  // running yet, its peak shows the training run.
  const std::string recording =
      std::string(VRAMSCOPE_NVML_DATA_DIR) + "/../../../data/h200-training.vsrec";
  const json summary = show_json(dir, recording);
  ASSERT_EQ(summary["devices"].size(), 1U);
  char peak[32];
  std::snprintf(peak, sizeof peak, "%.1fG/",
                summary["devices"][0]["peak_used_bytes"].get<double>() / (1 << 30));
  const CliResult r = run_cli(dir, {"top", "--replay", recording, "--once"}, {{"COLUMNS", "120"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gpu_line =
      r.out.substr(r.out.find('\n') + 1, r.out.find('\n', r.out.find('\n') + 1));
  EXPECT_NE(gpu_line.find(peak), std::string::npos) << peak << "\n" << r.out;
  EXPECT_EQ(r.out.find("quit"), std::string::npos) << r.out;
}

// The bundled recording's peak said "non-torch 6.6G" for a process whose context was 758 MiB: the
// driver's reading and torch's reserved were taken apart while segments grew. Format 4 records
// the agent's settled pairing, and every reader of the recording joins with it. Here the driver
// lists 30000 MiB (read mid-growth) while torch reserves 24576 MiB and the agent last paired
// the driver with reserved at a 528 MiB context.
TEST(CliRecord, ARecordedFrameShowsTheAgentsSettledNonPyTorchNotTheGapOfOneInstant) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  OneGpuTrainer trainer(dir);
  ASSERT_GT(trainer.pid(), 0);
  const uint64_t mib = OneGpuTrainer::mib;
  const auto& env = trainer.env();

  // What each reader of a recording says the process's non-PyTorch bytes are.
  struct Read {
    std::vector<uint64_t> exported;
    std::string issues;
    std::string legend;
  };
  const auto record_and_read = [&](const std::string& name) {
    const std::string file = dir.file(name);
    const CliResult recorded =
        run_cli(dir, {"record", "-o", file, "-i", "50ms", "--duration", "120ms"}, env);
    EXPECT_EQ(recorded.exit_code, 0) << recorded.err;
    const std::string jsonl = dir.file(name + ".jsonl");
    const CliResult exported = run_cli(dir, {"export", file, "--jsonl", jsonl});
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    Read read;
    std::ifstream in(jsonl);
    for (std::string line; std::getline(in, line);) {
      const json torch = json::parse(line)["devices"][0]["processes"][0]["torch"];
      read.exported.push_back(torch["non_pytorch_bytes"].get<uint64_t>());
      read.issues = torch["issues"].dump();
    }
    const CliResult top =
        run_cli(dir, {"top", "--replay", file, "--once"}, {{"COLUMNS", "120"}, {"LINES", "30"}});
    EXPECT_EQ(top.exit_code, 0) << top.err;
    std::smatch legend;
    if (std::regex_search(top.out, legend, std::regex(R"(non-torch \S+)"))) read.legend = legend[0];
    return read;
  };

  // Without a pairing (an agent of format 2, or a torch without driver access): driver - reserved.
  trainer.publish();
  const Read gap = record_and_read("gap.vsrec");
  ASSERT_FALSE(gap.exported.empty());
  for (uint64_t bytes : gap.exported) EXPECT_EQ(bytes, 5424 * mib);
  EXPECT_EQ(gap.legend, "non-torch 5.3G");

  DriverBreakdown settled;
  settled.paired_ns = 1'700'000'000'000'000'000;
  settled.reserved_bytes = 24576 * mib;
  settled.context_bytes = 464 * mib;
  settled.other_bytes = 64 * mib;
  settled.first_context_bytes = 464 * mib;
  settled.driver_bytes = settled.reserved_bytes + settled.non_pytorch_bytes();
  trainer.stats.breakdown = settled;
  trainer.publish();
  const Read paired = record_and_read("paired.vsrec");
  ASSERT_FALSE(paired.exported.empty());
  for (uint64_t bytes : paired.exported) EXPECT_EQ(bytes, 528 * mib);
  EXPECT_NE(paired.issues.find("driver and torch read apart"), std::string::npos) << paired.issues;
  EXPECT_EQ(paired.legend, "non-torch 528M");
  const CliResult show = run_cli(dir, {"show", "--json", dir.file("paired.vsrec")});
  const json summary = json::parse(show.out);
  EXPECT_EQ(summary["format_version"], format::recording_version) << show.out;
  EXPECT_EQ(summary["processes"][0]["driver_parts_at_peak"]["non_pytorch_bytes"], 528 * mib)
      << show.out;
  // The text names the settled parts at the process's peak; a recording without a pairing has
  // no such line (show does not invent them from driver - reserved).
  const CliResult text = run_cli(dir, {"show", dir.file("paired.vsrec")});
  EXPECT_NE(text.out.find("at the used peak: non-PyTorch 528MiB = context 464MiB + other 64MiB\n"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(run_cli(dir, {"show", dir.file("gap.vsrec")}).out.find("at the used peak"),
            std::string::npos);
}

TEST(CliShow, SummaryTextMatchesGoldenForAFixedRecording) {
  VRAMSCOPE_REQUIRE_DOUBLE();
  TempDir dir;
  const std::string file = dir.file("one.vsrec");
  ASSERT_EQ(run_cli(dir, {"record", "-o", file, "-i", "1s", "--duration", "1ms"},
                    double_env(nvml_script("mig.json")))
                .exit_code,
            0);
  const CliResult r = run_cli(dir, {"show", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string text = replace_all(r.out, file, "<FILE>");
  text = std::regex_replace(text, std::regex(R"(Host      \S+,)"), "Host      <HOSTNAME>,");
  text = std::regex_replace(text, std::regex(R"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), "<TIME>");
  text = std::regex_replace(text, std::regex(R"(written by vramscope [0-9.]+)"),
                            "written by vramscope <VERSION>");
  expect_golden("cli/show_one_sample.txt", text);
}

}  // namespace
}  // namespace vramscope::testing
