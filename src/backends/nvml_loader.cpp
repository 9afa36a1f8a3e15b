// src/backends/nvml_loader.cpp -- dlopen of an NVML library and resolution of its entry points
//
// NVML is loaded at run time so that vramscope starts (and says why) on machines without a
// driver, and so that tests can substitute a scripted library. nvml.h remaps the unversioned
// names to the newest version with macros; we do the same by hand: newest symbol first, then
// the older ones, remembering which version we got because the struct layouts differ.
#include "vramscope/backends/nvml_loader.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <initializer_list>
#include <utility>

namespace vramscope::nvml {
namespace {

/// The soname the driver package installs, then the dev symlink (absent on driver-only hosts).
constexpr const char* default_sonames[] = {"libnvidia-ml.so.1", "libnvidia-ml.so"};

/// Resolves `names` in order into `out`; returns the index of the name found, or -1.
/// dlsym returns an object pointer; POSIX guarantees it converts to a function pointer.
template <class Fn>
int resolve_first(void* handle, Fn& out, std::initializer_list<const char*> names) {
  int position = 0;
  for (const char* name : names) {
    if (void* symbol = dlsym(handle, name)) {
      out = reinterpret_cast<Fn>(symbol);
      return position;
    }
    ++position;
  }
  out = nullptr;
  return -1;
}

/// Maps the position in a {v3, v2, unversioned} list to the struct version it implies.
SymbolVersion version_from_position(int position) {
  constexpr SymbolVersion versions[] = {3, 2, 0};
  return position < 0 ? 0 : versions[position];
}

/// Fills `api` from `handle`; returns the name of the first mandatory symbol missing, or null.
const char* resolve_api(void* handle, Api& api) {
  if (resolve_first(handle, api.init, {"nvmlInit_v2", "nvmlInit"}) < 0) return "nvmlInit_v2";
  if (resolve_first(handle, api.shutdown, {"nvmlShutdown"}) < 0) return "nvmlShutdown";
  if (resolve_first(handle, api.device_get_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}) <
      0) {
    return "nvmlDeviceGetCount_v2";
  }
  if (resolve_first(handle, api.device_get_handle_by_index,
                    {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}) < 0) {
    return "nvmlDeviceGetHandleByIndex_v2";
  }
  // The v1 name is not remapped by nvml.h: both are separate functions and both are useful.
  resolve_first(handle, api.device_get_memory_info_v2, {"nvmlDeviceGetMemoryInfo_v2"});
  resolve_first(handle, api.device_get_memory_info, {"nvmlDeviceGetMemoryInfo"});
  if (api.device_get_memory_info == nullptr && api.device_get_memory_info_v2 == nullptr) {
    return "nvmlDeviceGetMemoryInfo";
  }

  resolve_first(handle, api.error_string, {"nvmlErrorString"});
  resolve_first(handle, api.system_get_driver_version, {"nvmlSystemGetDriverVersion"});
  resolve_first(handle, api.device_get_name, {"nvmlDeviceGetName"});
  resolve_first(handle, api.device_get_uuid, {"nvmlDeviceGetUUID"});
  api.pci_info_version = version_from_position(resolve_first(
      handle, api.device_get_pci_info,
      {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"}));
  resolve_first(handle, api.device_get_bar1_memory_info, {"nvmlDeviceGetBAR1MemoryInfo"});

  const std::pair<ProcessListCall*, const char*> lists[] = {
      {&api.compute_processes, "nvmlDeviceGetComputeRunningProcesses"},
      {&api.graphics_processes, "nvmlDeviceGetGraphicsRunningProcesses"},
      {&api.mps_processes, "nvmlDeviceGetMPSComputeRunningProcesses"},
  };
  for (const auto& [call, base] : lists) {
    const std::string v3 = std::string(base) + "_v3";
    const std::string v2 = std::string(base) + "_v2";
    call->version =
        version_from_position(resolve_first(handle, call->fn, {v3.c_str(), v2.c_str(), base}));
  }

  resolve_first(handle, api.device_get_mig_mode, {"nvmlDeviceGetMigMode"});
  resolve_first(handle, api.device_get_max_mig_device_count, {"nvmlDeviceGetMaxMigDeviceCount"});
  resolve_first(handle, api.device_get_mig_device_handle_by_index,
                {"nvmlDeviceGetMigDeviceHandleByIndex"});
  resolve_first(handle, api.device_get_gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
  resolve_first(handle, api.device_get_compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
  return nullptr;
}

/// The path the dynamic linker actually loaded for `handle` (a soname resolves through the
/// search path, which may lead to the toolkit stub via LD_LIBRARY_PATH).
std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

std::string stub_message(const std::string& path) {
  return "refusing to load " + path +
         ": it is the CUDA toolkit's link-time stub, not the driver's NVML library "
         "(point VRAMSCOPE_NVML_LIBRARY at the driver's libnvidia-ml.so.1)";
}

}  // namespace

Library::Library(void* handle, std::string path, const Api& api)
    : m_handle(handle), m_path(std::move(path)), m_api(api) {}

Library::~Library() {
  if (m_handle != nullptr) dlclose(m_handle);
}

bool is_stub_path(std::string_view path) { return path.find("/stubs/") != std::string_view::npos; }

std::vector<std::string> library_candidates(const std::string& explicit_path) {
  if (!explicit_path.empty()) return {explicit_path};
  const char* from_env = std::getenv("VRAMSCOPE_NVML_LIBRARY");
  if (from_env != nullptr && from_env[0] != '\0') return {from_env};
  return {std::begin(default_sonames), std::end(default_sonames)};
}

LoadResult load_library(const std::string& explicit_path) {
  const std::vector<std::string> candidates = library_candidates(explicit_path);
  std::string first_error;
  std::string stub_error;
  for (const std::string& candidate : candidates) {
    if (is_stub_path(candidate)) {
      stub_error = stub_message(candidate);
      continue;
    }
    dlerror();  // clear any stale error so the text below is ours
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* text = dlerror();
      if (first_error.empty())
        first_error = text != nullptr ? text : candidate + ": cannot be loaded";
      continue;
    }
    std::string path = loaded_path(handle, candidate);
    if (is_stub_path(path)) {
      stub_error = stub_message(path);
      dlclose(handle);
      continue;
    }
    Api api;
    if (const char* missing = resolve_api(handle, api)) {
      dlclose(handle);
      return {nullptr, BackendFailure::MissingSymbol,
              "NVML library " + path + " lacks " + missing +
                  " (not an NVML library, or a driver too old for vramscope)"};
    }
    return {std::make_unique<Library>(handle, std::move(path), api), BackendFailure::None, {}};
  }
  if (!stub_error.empty()) return {nullptr, BackendFailure::LibraryNotFound, stub_error};
  std::string message = "cannot load the NVML library (" + first_error + ")";
  return {nullptr, BackendFailure::LibraryNotFound, message};
}

}  // namespace vramscope::nvml
