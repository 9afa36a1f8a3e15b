// cli/python_exec.cpp -- finding Python and exec'ing it for `run` and `fit` (see python_exec.hpp)
#include "python_exec.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "run_python.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

/// This executable's path (empty when /proc cannot say).
std::string self_exe_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

std::string python_interpreter() {
  return find_python(std::getenv("VRAMSCOPE_PYTHON"), self_exe_path(),
                     [](const std::string& path) { return ::access(path.c_str(), X_OK) == 0; });
}

void exec_python(std::string_view command, const std::vector<std::string>& argv) {
  if (argv.empty()) throw Error(std::string(command) + ": nothing to start");
  std::vector<char*> pointers;
  pointers.reserve(argv.size() + 1);
  for (const std::string& arg : argv) pointers.push_back(const_cast<char*>(arg.c_str()));
  pointers.push_back(nullptr);
  ::execvp(pointers[0], pointers.data());
  throw Error(std::string(command) + ": cannot start " + argv.front() + ": " + errno_text(errno) +
              " (set VRAMSCOPE_PYTHON to the interpreter that has torch and vramscope)");
}

}  // namespace vramscope::cli
