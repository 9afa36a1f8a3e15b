// tests/cpp/run/test_python_exec.cpp -- the one hand-over to Python of `vramscope run` and `fit`
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "python_exec.hpp"
#include "vramscope/status.hpp"

namespace vramscope::cli {
namespace {

TEST(PythonInterpreter, TheEnvironmentChoosesIt) {
  ::setenv("VRAMSCOPE_PYTHON", "/opt/py/bin/python3.11", 1);
  EXPECT_EQ(python_interpreter(), "/opt/py/bin/python3.11");
  ::unsetenv("VRAMSCOPE_PYTHON");
  EXPECT_FALSE(python_interpreter().empty());
}

TEST(ExecPython, AnInterpreterThatCannotStartIsOneErrorNamingTheCommand) {
  for (const char* command : {"run", "fit"}) {
    try {
      exec_python(command, {"/nonexistent/python3", "-m", "vramscope.predict"});
      FAIL() << "exec_python returned";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string(command) +
                    ": cannot start /nonexistent/python3: No such file or directory (set "
                    "VRAMSCOPE_PYTHON to the interpreter that has torch and vramscope)");
      EXPECT_EQ(e.exit_code(), ExitError);
    }
  }
  EXPECT_THROW(exec_python("fit", {}), Error);
}

}  // namespace
}  // namespace vramscope::cli
