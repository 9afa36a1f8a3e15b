// cli/run_python.cpp -- pure helpers of `vramscope run` (see run_python.hpp)
#include "run_python.hpp"

#include <cstdio>

namespace vramscope::cli {

std::string find_python(const char* env_python, const std::string& self_exe,
                        const std::function<bool(const std::string&)>& is_executable) {
  if (env_python != nullptr && *env_python != '\0') return env_python;
  const auto slash = self_exe.rfind('/');
  if (slash != std::string::npos) {
    std::string beside = self_exe.substr(0, slash + 1) + "python3";
    if (is_executable(beside)) return beside;
  }
  return "python3";
}

std::vector<std::string> python_run_argv(const std::string& python,
                                         const std::vector<std::string>& program) {
  std::vector<std::string> argv{python, "-m", "vramscope.run"};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::string format_interval_ms(int64_t interval_ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(interval_ns) / 1e6);
  return buf;
}

}  // namespace vramscope::cli
