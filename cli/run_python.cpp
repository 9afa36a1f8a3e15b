// cli/run_python.cpp -- pure helpers of `vramscope run` (see run_python.hpp)
#include "run_python.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace vramscope::cli {

std::optional<double> parse_interval_ms(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double to_ms;
  };
  // Longest suffixes first so that "ms" is not read as "s".
  static constexpr Unit units[] = {{"ms", 1.0}, {"us", 1e-3}, {"ns", 1e-6}, {"s", 1e3}};
  double scale = 1.0;
  for (const Unit& unit : units) {
    if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix)) {
      text.remove_suffix(unit.suffix.size());
      scale = unit.to_ms;
      break;
    }
  }
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  const double interval_ms = value * scale;
  if (!std::isfinite(interval_ms) || interval_ms <= 0) return std::nullopt;
  return interval_ms;
}

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

std::string format_interval_ms(double interval_ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", interval_ms);
  return buf;
}

}  // namespace vramscope::cli
