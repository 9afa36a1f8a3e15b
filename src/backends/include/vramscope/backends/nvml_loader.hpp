// src/backends/include/vramscope/backends/nvml_loader.hpp -- dlopen of an NVML library and resolution of its entry points
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vramscope/backend.hpp"
#include "vramscope/backends/nvml_api.hpp"

namespace vramscope::nvml {

/// A loaded NVML library: the dlopen handle and the entry points resolved from it.
/// Unloads the library when destroyed; call nvmlShutdown before that (the backend does).
class Library {
 public:
  Library(void* handle, std::string path, const Api& api);
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  /// The resolved entry points; the mandatory ones are non-null.
  const Api& api() const { return m_api; }
  /// The file that was loaded (resolved through the dynamic linker when opened by soname).
  const std::string& path() const { return m_path; }

 private:
  void* m_handle;
  std::string m_path;
  Api m_api;
};

/// Outcome of load_library(): a library, or a failure with one line for the user.
struct LoadResult {
  std::unique_ptr<Library> library;
  BackendFailure failure = BackendFailure::None;
  std::string message;
};

/// Is `path` the CUDA toolkit's link-time stub (…/stubs/libnvidia-ml.so)? It has no driver
/// behind it: nvmlInit fails at run time, so we refuse it with a clearer message.
bool is_stub_path(std::string_view path);

/// The files to try, in order: `explicit_path` if set, else $VRAMSCOPE_NVML_LIBRARY if set,
/// else "libnvidia-ml.so.1" then "libnvidia-ml.so" (driver-only hosts lack the latter).
std::vector<std::string> library_candidates(const std::string& explicit_path);

/// dlopens the first loadable candidate and resolves every entry point, newest version first.
/// Never throws; a missing mandatory symbol is a failure, a missing optional one a null pointer.
LoadResult load_library(const std::string& explicit_path);

}  // namespace vramscope::nvml
