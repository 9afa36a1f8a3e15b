// tests/cpp/backends/test_open_sampler.cpp -- the mapping of open failures to exit codes and one-line messages
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "vramscope/backends/open_sampler.hpp"

namespace vramscope {
namespace {

TEST(OpenSampler, OpenFailuresMapToExitCodes) {
  EXPECT_EQ(backend_open_error(BackendFailure::LibraryNotFound, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::DriverNotLoaded, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::NoDevices, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::MissingSymbol, "x").exit_code(), ExitNoGpu);
  EXPECT_EQ(backend_open_error(BackendFailure::NoPermission, "x").exit_code(), ExitError);
  EXPECT_EQ(backend_open_error(BackendFailure::Other, "x").exit_code(), ExitError);
}

TEST(OpenSampler, OpenFailureMessagesAreOneLineAndSayWhatToDo) {
  unsetenv("VRAMSCOPE_NVML_LIBRARY");
  const std::string missing =
      backend_open_error(BackendFailure::LibraryNotFound, "libnvidia-ml.so.1: cannot open").what();
  EXPECT_EQ(missing,
            "no NVIDIA driver: libnvidia-ml.so.1: cannot open (set VRAMSCOPE_NVML_LIBRARY to use "
            "another NVML)");
  EXPECT_EQ(std::string(backend_open_error(BackendFailure::NoDevices, "zero devices").what()),
            "no GPU: zero devices");
  // A message that already names the problem is not prefixed twice.
  EXPECT_EQ(std::string(backend_open_error(BackendFailure::DriverNotLoaded,
                                           "NVIDIA driver not loaded (NVML: Driver Not Loaded)")
                            .what()),
            "NVIDIA driver not loaded (NVML: Driver Not Loaded)");
  for (auto failure : {BackendFailure::LibraryNotFound, BackendFailure::Other}) {
    EXPECT_EQ(std::string(backend_open_error(failure, "").what()).find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace vramscope
