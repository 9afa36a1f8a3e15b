// tests/cpp/cli/test_cli_nogpu.cpp -- the binary without a usable NVML, usage errors, bad files
#include <gtest/gtest.h>

#include <fstream>

#include "cli_runner.hpp"

namespace vramscope::testing {
namespace {

/// Is `text` exactly one line?
bool one_line(const std::string& text) {
  return !text.empty() && text.back() == '\n' && text.find('\n') == text.size() - 1;
}

TEST(CliNoGpu, MissingLibraryExitsThreeWithOneLine) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::map<std::string, std::optional<std::string>> env = {
      {"VRAMSCOPE_NVML_LIBRARY", dir.file("libnvidia-ml-absent.so.1")}};
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{},
        {"--json"},
        {"watch", "--count", "1"},
        {"record", "-o", dir.file("r.vsrec"), "--duration", "1s"}}) {
    const CliResult r = run_cli(dir, args, env);
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("NVIDIA driver"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("VRAMSCOPE_NVML_LIBRARY"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // Nothing is created when recording cannot start.
  EXPECT_FALSE(std::ifstream(dir.file("r.vsrec")).good());
}

TEST(CliNoGpu, ArgumentsAreCheckedBeforeTheDriver) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::map<std::string, std::optional<std::string>> env = {
      {"VRAMSCOPE_NVML_LIBRARY", dir.file("libnvidia-ml-absent.so.1")}};
  const CliResult record =
      run_cli(dir, {"record", "-o", "/nonexistent/dir/x", "--duration", "1s"}, env);
  EXPECT_EQ(record.exit_code, 1) << record.err;
  EXPECT_EQ(
      record.err.rfind("vramscope: /nonexistent/dir/x: cannot create it (/nonexistent/dir: ", 0),
      0U)
      << record.err;
  for (const char* listen : {"999.1.1.1:80", "1.2.3:80", "[::zz]:80"}) {
    const CliResult exporter = run_cli(dir, {"exporter", "--listen", listen}, env);
    EXPECT_EQ(exporter.exit_code, 2) << listen << ": " << exporter.err;
    EXPECT_TRUE(one_line(exporter.err)) << exporter.err;
    EXPECT_NE(exporter.err.find("is not an IPv"), std::string::npos) << exporter.err;
  }
}

// std::stoi took " 80" and "+0"; CLI11 took an empty --max-size as "not given", and a bad size
// ended as exit 1.
TEST(CliNoGpu, ListenPortAndMaxSizeAreReadStrictly) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::map<std::string, std::optional<std::string>> env = {
      {"VRAMSCOPE_NVML_LIBRARY", dir.file("libnvidia-ml-absent.so.1")}};
  for (const char* listen : {" 80", "+0", "127.0.0.1: 80", "127.0.0.1:+80", "127.0.0.1:", "-1"}) {
    const CliResult r = run_cli(dir, {"exporter", "--listen", listen}, env);
    EXPECT_EQ(r.exit_code, 2) << "'" << listen << "': " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("--listen"), std::string::npos) << r.err;
  }
  for (const char* size : {"", "100", "lots", " 1GiB", "1GiB ", "-1GiB"}) {
    const CliResult r =
        run_cli(dir, {"record", "-o", dir.file("m.vsrec"), "--max-size", size}, env);
    EXPECT_EQ(r.exit_code, 2) << "'" << size << "': " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("--max-size"), std::string::npos) << r.err;
  }
}

// 2^63-1 ns overflowed the deadline arithmetic into a busy loop; a day is the longest interval.
TEST(CliNoGpu, IntervalsAboveADayAreUsageErrors) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::map<std::string, std::optional<std::string>> env = {
      {"VRAMSCOPE_NVML_LIBRARY", dir.file("libnvidia-ml-absent.so.1")}};
  for (const char* interval : {"9223372036854775807ns", "25h"}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"watch", "-i", interval, "--count", "1"},
          std::vector<std::string>{"record", "-o", dir.file("i.vsrec"), "-i", interval},
          std::vector<std::string>{"exporter", "--interval", interval}}) {
      const CliResult r = run_cli(dir, args, env);
      EXPECT_EQ(r.exit_code, 2) << args[0] << " " << interval << ": " << r.err;
      EXPECT_TRUE(one_line(r.err)) << r.err;
      EXPECT_NE(r.err.find("24h"), std::string::npos) << r.err;
    }
  }
}

TEST(CliNoGpu, BadIntervalsAreUsageErrors) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  for (const char* interval : {"0.5ms", "0", "abc", "-1s", "10 parsecs"}) {
    const CliResult r = run_cli(dir, {"watch", "--interval", interval, "--count", "1"});
    EXPECT_EQ(r.exit_code, 2) << interval << ": " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("--interval"), std::string::npos) << r.err;
  }
  const CliResult bad_duration =
      run_cli(dir, {"record", "-o", dir.file("x"), "--duration", "soon"});
  EXPECT_EQ(bad_duration.exit_code, 2) << bad_duration.err;
}

TEST(CliNoGpu, OptionErrorsAreUsageErrors) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  EXPECT_EQ(run_cli(dir, {"--json", "--csv"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir, {"--processes"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir, {"--units", "furlongs"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir, {"watch", "--format", "xml"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir, {"record"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir, {"no-such-command"}).exit_code, 2);
}

TEST(CliNoGpu, HelpTeachesAndSucceeds) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const CliResult root = run_cli(dir, {"--help"});
  EXPECT_EQ(root.exit_code, 0);
  EXPECT_NE(root.out.find("Exit codes"), std::string::npos);
  EXPECT_NE(root.out.find("--json"), std::string::npos);
  const CliResult record = run_cli(dir, {"record", "--help"});
  EXPECT_EQ(record.exit_code, 0);
  EXPECT_NE(record.out.find("--duration"), std::string::npos);
  // One usage, with both forms of the program; the examples use the recording suffix.
  const CliResult run = run_cli(dir, {"run", "--help"});
  EXPECT_EQ(run.out.find("Usage:"), run.out.rfind("Usage:")) << run.out;
  EXPECT_NE(run.out.find("Usage: vramscope run [OPTIONS] script.py [args...]\n"
                         "       vramscope run [OPTIONS] -m module [args...]\n"),
            std::string::npos)
      << run.out;
  const CliResult export_help = run_cli(dir, {"export", "--help"});
  EXPECT_NE(export_help.out.find("vramscope export run.vsrec --trace"), std::string::npos)
      << export_help.out;
  EXPECT_EQ(export_help.out.find(".vrs "), std::string::npos) << export_help.out;
}

TEST(CliNoGpu, ShowNeedsNoGpuAndRejectsForeignFiles) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::map<std::string, std::optional<std::string>> no_nvml = {
      {"VRAMSCOPE_NVML_LIBRARY", dir.file("absent.so")}};
  std::ofstream(dir.file("notes.txt")) << "these are not the bytes you are looking for\n";
  std::ofstream(dir.file("empty.vsrec")).flush();
  for (const std::string& name : std::vector<std::string>{"notes.txt", "empty.vsrec"}) {
    const CliResult r = run_cli(dir, {"show", dir.file(name)}, no_nvml);
    EXPECT_EQ(r.exit_code, 1) << name << ": " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const CliResult missing = run_cli(dir, {"show", dir.file("absent.vsrec")}, no_nvml);
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
}

TEST(CliNoGpu, AMissingOrUnreadableInputFileIsExitOneEverywhere) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const std::string absent = dir.file("absent.vsrec");
  const std::string folder = dir.file("");
  const auto every_reader = [&](const std::string& path) {
    return std::vector<std::vector<std::string>>{{"show", path},
                                                 {"top", "--replay", path, "--once"},
                                                 {"export", path, "--csv", dir.file("out.csv")},
                                                 {"report", path, "-o", dir.file("out.html")},
                                                 {"diff", path, path}};
  };
  for (const std::vector<std::string>& args : every_reader(absent)) {
    const CliResult r = run_cli(dir, args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "vramscope: " + absent + ": no such file\n");
  }
  // A directory is no file at all: a usage error (exit 2), in every command alike.
  for (const std::vector<std::string>& args : every_reader(folder)) {
    const CliResult r = run_cli(dir, args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "vramscope: " + folder + ": is a directory, not a file\n");
  }
}

TEST(CliNoGpu, UsageErrorsAreOneLineInVramscopesWords) {
  VRAMSCOPE_REQUIRE_CLI();
  TempDir dir;
  const CliResult unknown = run_cli(dir, {"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err,
            "vramscope: unknown command 'frobnicate'; the commands are watch, record, show, diff, "
            "report, top, run, fit, export, exporter (vramscope --help)\n");
  const CliResult count = run_cli(dir, {"watch", "-n", "abc"});
  EXPECT_EQ(count.err,
            "vramscope: watch: --count: expected a whole number from 0 to 18446744073709551615, "
            "got 'abc' (vramscope watch --help)\n");
  const CliResult option = run_cli(dir, {"watch", "--frob"});
  EXPECT_EQ(option.err, "vramscope: unexpected argument '--frob' (vramscope watch --help)\n");
  EXPECT_EQ(run_cli(dir, {"show"}).err, "vramscope: show: missing file (vramscope show --help)\n");
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--json", "--csv"},
                                               {"--units", "furlongs"},
                                               {"watch", "--format", "xml"},
                                               {"record"},
                                               {"top", "--speed", "1000"},
                                               {"export"},
                                               {"run"},
                                               {"--frob"}}) {
    const CliResult r = run_cli(dir, args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_EQ(r.err.rfind("vramscope: ", 0), 0U) << r.err;
    EXPECT_EQ(r.err.find("Run with --help"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace vramscope::testing
