// tests/cpp/run/test_run_python.cpp -- interpreter choice, argv and interval text of `vramscope run`
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "run_python.hpp"

namespace vramscope::cli {
namespace {

TEST(FormatInterval, RoundTripsThroughPython) {
  EXPECT_EQ(format_interval_ms(10'000'000), "10");
  EXPECT_EQ(format_interval_ms(250'000), "0.25");
  EXPECT_EQ(format_interval_ms(1'500'000'000), "1500");
  EXPECT_EQ(format_interval_ms(1), "1e-06");
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
            (std::vector<std::string>{"python3", "-m", "vramscope.run", "train.py", "--epochs", "3",
                                      "-m", "x"}));
  const std::vector<std::string> module{"-m", "pkg.train", "-q"};
  EXPECT_EQ(
      python_run_argv("/v/python3", module),
      (std::vector<std::string>{"/v/python3", "-m", "vramscope.run", "-m", "pkg.train", "-q"}));
}

}  // namespace
}  // namespace vramscope::cli
