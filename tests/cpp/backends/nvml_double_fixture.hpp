// tests/cpp/backends/nvml_double_fixture.hpp -- gtest fixture driving the scripted NVML double
//
// The backend under test loads the double itself through dlopen, exactly like the real
// libnvidia-ml.so.1. The fixture also dlopens it, which keeps one copy loaded for the whole test
// (so its call counters survive the backend's dlclose) and gives access to the test hooks.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "vramscope/backend.hpp"
#include "vramscope/backends/open_sampler.hpp"

namespace vramscope::testing {

class NvmlDoubleTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (m_hooks != nullptr) dlclose(m_hooks);
    for (const std::string& path : m_files) std::remove(path.c_str());
    unsetenv("VRAMSCOPE_NVML_DOUBLE_SCRIPT");
    unsetenv("VRAMSCOPE_NVML_LIBRARY");
  }

  /// Writes `json_text` to a fresh file and names it in $VRAMSCOPE_NVML_DOUBLE_SCRIPT.
  void use_script(const std::string& json_text) {
    std::string path = ::testing::TempDir() + "nvml_script_" + std::to_string(getpid()) + "_" +
                       std::to_string(m_files.size()) + ".json";
    std::ofstream(path) << json_text;
    m_files.push_back(path);
    setenv("VRAMSCOPE_NVML_DOUBLE_SCRIPT", path.c_str(), 1);
  }

  /// Uses a canonical script of tests/data/nvml/.
  static void use_data_script(const std::string& name) {
    setenv("VRAMSCOPE_NVML_DOUBLE_SCRIPT",
           (std::string(VRAMSCOPE_NVML_DATA_DIR) + "/" + name).c_str(), 1);
  }

  /// Options that read every call at every sample: tests must not depend on how much time
  /// passes between two samples (the refresh tests set their own intervals).
  static NvmlOptions every_sample() {
    NvmlOptions options;
    options.bar1_refresh_ns = 0;
    options.driver_refresh_ns = 0;
    return options;
  }

  /// Keeps `library` (a double variant) loaded, so that calls() and reload() reach the same
  /// instance the code under test dlopens.
  void load_double(const char* library = VRAMSCOPE_NVML_DOUBLE_PATH) {
    if (m_hooks == nullptr) {
      m_hooks = dlopen(library, RTLD_NOW | RTLD_LOCAL);
      EXPECT_NE(m_hooks, nullptr) << dlerror();
    }
  }

  /// Opens the backend on `library` (a double variant) and keeps the library loaded.
  BackendOpenResult open(const char* library = VRAMSCOPE_NVML_DOUBLE_PATH,
                         NvmlOptions options = every_sample()) {
    load_double(library);
    options.library_path = library;
    return open_nvml_backend(options);
  }

  /// Opens the backend and expects success.
  std::unique_ptr<DeviceBackend> open_ok(const char* library = VRAMSCOPE_NVML_DOUBLE_PATH,
                                         NvmlOptions options = every_sample()) {
    BackendOpenResult result = open(library, std::move(options));
    EXPECT_EQ(result.failure, BackendFailure::None) << result.message;
    EXPECT_NE(result.backend, nullptr);
    return std::move(result.backend);
  }

  /// How many times the double saw a call to `function`.
  unsigned long long calls(const char* function) const {
    using Fn = unsigned long long (*)(const char*);
    auto fn = reinterpret_cast<Fn>(dlsym(m_hooks, "vramscope_nvml_double_calls"));
    return fn != nullptr ? fn(function) : ~0ULL;
  }

  void reset_calls() const {
    using Fn = void (*)();
    if (auto fn = reinterpret_cast<Fn>(dlsym(m_hooks, "vramscope_nvml_double_reset_calls"))) fn();
  }

  /// Replaces the script and makes the loaded double re-read it (a GPU comes back, …).
  void reload(const std::string& json_text) {
    use_script(json_text);
    using Fn = int (*)();
    auto fn = reinterpret_cast<Fn>(dlsym(m_hooks, "vramscope_nvml_double_reload"));
    ASSERT_NE(fn, nullptr);
    ASSERT_EQ(fn(), 0);
  }

  static std::vector<DeviceSample> sample(DeviceBackend& backend) {
    std::vector<DeviceSample> samples;
    backend.sample_devices(samples);
    return samples;
  }

 private:
  void* m_hooks = nullptr;
  std::vector<std::string> m_files;
};

}  // namespace vramscope::testing
