// cli/python_exec.hpp -- `vramscope run` and `vramscope fit` hand over to Python: which one, and exec
//
// Both commands replace themselves with a Python process (exec, not fork: signals, the exit code
// and the terminal stay the program's); this is the one place that finds the interpreter and
// execs it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vramscope::cli {

/// The interpreter `run` and `fit` start: $VRAMSCOPE_PYTHON when set, else `python3` beside this
/// executable when it can run, else `python3` for a PATH search (find_python in run_python.hpp).
std::string python_interpreter();

/// Replaces this process with `argv` (argv[0] searched in PATH, as execvp does). Returns only by
/// throwing vramscope::Error "<command>: cannot start <argv[0]>: <why> (set VRAMSCOPE_PYTHON
/// ...)", exit code 1.
[[noreturn]] void exec_python(std::string_view command, const std::vector<std::string>& argv);

}  // namespace vramscope::cli
