// agent/device_allocations.cpp -- the walk of the address space through libcuda (see device_allocations.hpp)
#include "device_allocations.hpp"

#include <dlfcn.h>

#include <fstream>
#include <sstream>
#include <type_traits>

namespace vramscope::agent {

namespace {

// The few libcuda types and values used here (cuda.h is not needed to build the agent).
using CuResult = int;
using CuDevice = int;
using CuContext = void*;
using CuDevicePtr = unsigned long long;  // NOLINT(google-runtime-int): libcuda's own type
constexpr CuResult cuda_success = 0;
constexpr int pointer_attribute_memory_type = 2;
constexpr int pointer_attribute_is_managed = 8;
constexpr int pointer_attribute_device_ordinal = 9;
constexpr unsigned int memory_type_device = 2;
/// The driver's allocation granularity for device memory (cuMemAlloc rounds to it).
constexpr uint64_t page_bytes = uint64_t{2} << 20U;

}  // namespace

struct DeviceAllocations::Driver {
  CuResult (*device_get)(CuDevice*, int) = nullptr;
  CuResult (*primary_state)(CuDevice, unsigned int*, int*) = nullptr;
  CuResult (*primary_retain)(CuContext*, CuDevice) = nullptr;
  CuResult (*set_current)(CuContext) = nullptr;
  CuResult (*address_range)(CuDevicePtr*, std::size_t*, CuDevicePtr) = nullptr;
  CuResult (*pointer_attribute)(void*, int, CuDevicePtr) = nullptr;
};

bool DeviceAllocations::open() {
  if (m_opened) return m_driver != nullptr;
  m_opened = true;
  // Only if torch already loaded it: loading libcuda here would initialise nothing useful.
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (library == nullptr) {
    m_error = "libcuda is not loaded in this process";
    return false;
  }
  auto* driver = new Driver();  // kept with the library for the life of the process
  bool complete = true;
  auto bind = [&](auto& function, const char* name) {
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, name));
    complete = complete && function != nullptr;
  };
  bind(driver->device_get, "cuDeviceGet");
  bind(driver->primary_state, "cuDevicePrimaryCtxGetState");
  bind(driver->primary_retain, "cuDevicePrimaryCtxRetain");
  bind(driver->set_current, "cuCtxSetCurrent");
  bind(driver->address_range, "cuMemGetAddressRange_v2");
  bind(driver->pointer_attribute, "cuPointerGetAttribute");
  if (!complete) {
    delete driver;
    m_error = "libcuda lacks an entry point the walk needs";
    return false;
  }
  m_driver = driver;
  return true;
}

std::optional<uint64_t> DeviceAllocations::bytes(int device, std::size_t max_probes) {
  std::lock_guard lock(m_mutex);
  if (!open()) return std::nullopt;
  const Driver& cu = *m_driver;
  if (device < 0) return std::nullopt;
  if (m_contexts.size() <= static_cast<std::size_t>(device)) {
    m_contexts.resize(static_cast<std::size_t>(device) + 1, nullptr);
  }
  CuContext& context = m_contexts[static_cast<std::size_t>(device)];
  if (context == nullptr) {
    CuDevice handle = 0;
    unsigned int flags = 0;
    int active = 0;
    // Retained only while torch has it active: retaining an inactive one would create it.
    if (cu.device_get(&handle, device) != cuda_success ||
        cu.primary_state(handle, &flags, &active) != cuda_success || active == 0 ||
        cu.primary_retain(&context, handle) != cuda_success) {
      context = nullptr;
      m_error = "device " + std::to_string(device) + " has no active CUDA context";
      return std::nullopt;
    }
  }
  if (cu.set_current(context) != cuda_success) {
    m_error = "cuCtxSetCurrent failed";
    return std::nullopt;
  }
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  const std::vector<tracking::AddressRange> ranges = tracking::device_candidate_ranges(text.str());
  auto probe = [&cu](uint64_t address, uint64_t* base, uint64_t* size) {
    CuDevicePtr found = 0;
    std::size_t length = 0;
    if (cu.address_range(&found, &length, address) != cuda_success) return false;
    *base = found;
    *size = length;
    return true;
  };
  auto keep = [&cu, device](uint64_t base, uint64_t /*size*/) {
    unsigned int type = 0;
    int ordinal = -1;
    unsigned int managed = 0;
    return cu.pointer_attribute(&type, pointer_attribute_memory_type, base) == cuda_success &&
           type == memory_type_device &&
           cu.pointer_attribute(&ordinal, pointer_attribute_device_ordinal, base) == cuda_success &&
           ordinal == device &&
           (cu.pointer_attribute(&managed, pointer_attribute_is_managed, base) != cuda_success ||
            managed == 0);
  };
  std::optional<uint64_t> total =
      tracking::walk_allocations(ranges, page_bytes, max_probes, probe, keep);
  m_error = total ? "" : "the address space is too large to walk";
  return total;
}

}  // namespace vramscope::agent
