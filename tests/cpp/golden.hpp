// tests/cpp/golden.hpp -- compare text with a checked-in golden file under tests/data/golden/
//
// Regenerate every golden with `VRAMSCOPE_UPDATE_GOLDENS=1 ctest --test-dir build/dev -R golden`
// (or any test filter), then review `git diff tests/data/golden` like code.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace vramscope::testing {

/// tests/data, as CTest passes it (VRAMSCOPE_TEST_DATA); falls back to a path relative to the
/// repository root.
inline std::string test_data_dir() {
  const char* dir = std::getenv("VRAMSCOPE_TEST_DATA");
  return dir != nullptr ? dir : "tests/data";
}

inline std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Replaces every occurrence of `from` in `text` with `to`.
inline std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

/// Expects `actual` to equal tests/data/golden/<name>; rewrites the file instead when
/// VRAMSCOPE_UPDATE_GOLDENS=1.
inline void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = test_data_dir() + "/golden/" + name;
  const char* update = std::getenv("VRAMSCOPE_UPDATE_GOLDENS");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream probe(path);
  ASSERT_TRUE(probe.good()) << "missing golden " << path
                            << " (create it with VRAMSCOPE_UPDATE_GOLDENS=1)";
  EXPECT_EQ(actual, read_text_file(path)) << "golden " << name << " differs; if the change is "
                                          << "intended, rerun with VRAMSCOPE_UPDATE_GOLDENS=1";
}

}  // namespace vramscope::testing
