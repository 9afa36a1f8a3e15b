// tests/cpp/run/test_run_python.cpp -- interval parsing, interpreter choice and argv of `vramscope run`
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "run_python.hpp"

namespace vramscope::cli {
namespace {

TEST(ParseInterval, AcceptsUnitsAndBareMilliseconds) {
  EXPECT_DOUBLE_EQ(*parse_interval_ms("10ms"), 10.0);
  EXPECT_DOUBLE_EQ(*parse_interval_ms("0.5s"), 500.0);
  EXPECT_DOUBLE_EQ(*parse_interval_ms("250us"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_interval_ms("1000000ns"), 1.0);
  EXPECT_DOUBLE_EQ(*parse_interval_ms("7"), 7.0);
}

TEST(ParseInterval, RejectsMalformedZeroAndNegative) {
  for (const char* bad : {"", "ms", "s", "10 ms", "10m", "abc", "0", "0ms", "-5ms", "1e999s",
                          "10msx", "nan"}) {
    EXPECT_FALSE(parse_interval_ms(bad).has_value()) << bad;
  }
}

TEST(FormatInterval, RoundTripsThroughPython) {
  EXPECT_EQ(format_interval_ms(10.0), "10");
  EXPECT_EQ(format_interval_ms(0.25), "0.25");
  EXPECT_EQ(format_interval_ms(1500.0), "1500");
}

TEST(FindPython, EnvironmentWins) {
  const auto never = [](const std::string&) { return false; };
  EXPECT_EQ(find_python("/opt/py/bin/python3.11", "/venv/bin/vramscope", never),
            "/opt/py/bin/python3.11");
}

TEST(FindPython, PrefersThePythonBesideTheExecutable) {
  std::set<std::string> asked;
  const auto only_venv = [&](const std::string& path) {
    asked.insert(path);
    return path == "/venv/bin/python3";
  };
  EXPECT_EQ(find_python(nullptr, "/venv/bin/vramscope", only_venv), "/venv/bin/python3");
  EXPECT_EQ(find_python("", "/venv/bin/vramscope", only_venv), "/venv/bin/python3");
  EXPECT_EQ(asked, std::set<std::string>{"/venv/bin/python3"});
}

TEST(FindPython, FallsBackToPathSearch) {
  const auto never = [](const std::string&) { return false; };
  EXPECT_EQ(find_python(nullptr, "/usr/local/bin/vramscope", never), "python3");
  EXPECT_EQ(find_python(nullptr, "", never), "python3");
}

TEST(PythonRunArgv, ForwardsTheProgramVerbatim) {
  const std::vector<std::string> script{"train.py", "--epochs", "3", "-m", "x"};
  EXPECT_EQ(python_run_argv("python3", script),
            (std::vector<std::string>{"python3", "-m", "vramscope.run", "train.py", "--epochs",
                                      "3", "-m", "x"}));
  const std::vector<std::string> module{"-m", "pkg.train", "-q"};
  EXPECT_EQ(python_run_argv("/v/python3", module),
            (std::vector<std::string>{"/v/python3", "-m", "vramscope.run", "-m", "pkg.train",
                                      "-q"}));
}

}  // namespace
}  // namespace vramscope::cli
