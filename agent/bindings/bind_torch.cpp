// agent/bindings/bind_torch.cpp -- load_torch(), torch_version() and the CPU proxy: the torch-facing library the extension calls
//
// The extension holds no torch code: vramscope._core.torchcheck chooses the library built for
// the imported torch (the wheel's, or one compiled on first use) and hands its path to
// load_torch() before anything else of the agent runs (torch_bridge.cpp dlopens it).
#include <nanobind/stl/string.h>

#include <string>

#include "bindings.hpp"
#include "torch_hooks.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

void bind_torch(nb::module_& m) {
  m.def("load_torch", &load_torch_library, "path"_a,
        "Load the torch-facing library at `path` (built for the imported torch; "
        "vramscope._core.torchcheck chooses it) and return the torch version it was built "
        "against. Raises RuntimeError when it cannot be loaded.");
  m.def("torch_version", &loaded_torch_version,
        "The torch version the loaded torch-facing library was built against.");
  m.def(
      "_bench_attach_cpu_proxy",
      [](double interval_ms) { return AgentState::instance().attach_cpu_proxy(interval_ms); },
      "interval_ms"_a = 10.0,
      "Benchmarks and tests: attach to torch's CPU tensors as device 0, for timing the callback "
      "without a GPU (cannot be undone; instead of attach()). Returns the mode.");
}

}  // namespace vramscope::agent
