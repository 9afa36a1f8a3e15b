// cli/run_python.hpp -- pure helpers of `vramscope run`: finding Python, its argv and environment
//
// Kept apart from cmd_run.cpp (which execs) so that tests link them without running anything.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vramscope::cli {

/// Chooses the Python interpreter: `env_python` ($VRAMSCOPE_PYTHON) when non-empty, else
/// `python3` in the folder of `self_exe` (a venv's scripts dir holds both) when
/// `is_executable` says it runs, else plain "python3" for a PATH search.
std::string find_python(const char* env_python, const std::string& self_exe,
                        const std::function<bool(const std::string&)>& is_executable);

/// The command line that runs `program` (script.py args... or -m module args...) under the agent:
/// `python -m vramscope.run program...`.
std::vector<std::string> python_run_argv(const std::string& python,
                                         const std::vector<std::string>& program);

/// Formats an interval for VRAMSCOPE_RUN_INTERVAL_MS (milliseconds, exact: "10", "0.25").
std::string format_interval_ms(int64_t interval_ns);

}  // namespace vramscope::cli
