// tests/cpp/exporters/golden.hpp -- compare text output with a checked-in golden file
//
// Goldens live in tests/data/golden/exporters/. A golden line may contain `{{ANY}}`, which matches
// any run of characters without a newline (volatile values such as durations).
// Regenerate after a reviewed change with:  VRAMSCOPE_UPDATE_GOLDENS=1 ctest -L exporters
// (then review `git diff tests/data/golden`; placeholders must be put back by hand).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace vramscope::test {

/// Path of a file under tests/data ($VRAMSCOPE_TEST_DATA overrides the source tree's folder).
inline std::string test_data_path(const std::string& relative) {
  const char* root = std::getenv("VRAMSCOPE_TEST_DATA");
  return std::string(root != nullptr ? root : VRAMSCOPE_TEST_DATA_DIR) + "/" + relative;
}

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Does `actual` match a golden line, honouring `{{ANY}}` placeholders?
inline bool line_matches(const std::string& golden, const std::string& actual) {
  if (golden.find("{{ANY}}") == std::string::npos) return golden == actual;
  std::string pattern;
  for (std::size_t i = 0; i < golden.size();) {
    if (golden.compare(i, 7, "{{ANY}}") == 0) {
      pattern += ".*";
      i += 7;
      continue;
    }
    const char c = golden[i++];
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) pattern += '\\';
    pattern += c;
  }
  return std::regex_match(actual, std::regex(pattern));
}

/// Expects `actual` to equal golden file `name` line by line (and in line count).
inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = test_data_path("golden/exporters/" + name);
  if (std::getenv("VRAMSCOPE_UPDATE_GOLDENS") != nullptr) {
    std::ofstream(path, std::ios::binary) << actual;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden " << path << " (VRAMSCOPE_UPDATE_GOLDENS=1 creates it)";
  std::stringstream golden_text;
  golden_text << in.rdbuf();
  ASSERT_EQ(golden_text.str().empty(), actual.empty());
  ASSERT_EQ(golden_text.str().back() == '\n', actual.back() == '\n') << "trailing newline differs";
  const auto golden = split_lines(golden_text.str());
  const auto lines = split_lines(actual);
  for (std::size_t i = 0; i < std::min(golden.size(), lines.size()); ++i) {
    EXPECT_TRUE(line_matches(golden[i], lines[i]))
        << name << ":" << i + 1 << "\n  golden: " << golden[i] << "\n  actual: " << lines[i];
  }
  EXPECT_EQ(golden.size(), lines.size()) << name << ": line count differs";
}

}  // namespace vramscope::test
