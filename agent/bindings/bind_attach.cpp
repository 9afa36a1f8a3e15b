// agent/bindings/bind_attach.cpp -- attach() and what says whether and how the agent is attached
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "torch_hooks.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

void bind_attach(nb::module_& m) {
  m.def(
      "attach",
      [](double interval_ms, bool publish, int rank, int world_size,
         const std::vector<std::string>& device_uuids) {
        return AgentState::instance().attach(interval_ms, publish, rank, world_size, device_uuids);
      },
      "interval_ms"_a = 10.0, "publish"_a = true, "rank"_a = -1, "world_size"_a = -1,
      "device_uuids"_a = std::vector<std::string>{},
      "Attach the allocator trace tracker and OOM observer to every CUDA device, seed the "
      "counters from torch and start the agent thread. Idempotent. Returns the mode: "
      "'events' or 'polling: <reason>'. Raises RuntimeError without CUDA or before CUDA is "
      "initialised.");
  m.def(
      "is_attached", [] { return attached_or_null() != nullptr; }, "Has attach() succeeded?");
  m.def(
      "mode", [] { return attached().mode_text(); }, "'events' or 'polling: <reason>'.");
  m.def(
      "device_count", [] { return attached().core->device_count(); },
      "Number of CUDA devices tracked.");
  m.def(
      "segment_path",
      [] {
        Attachment* state = attached_or_null();
        return state == nullptr ? std::string() : state->core->segment_path();
      },
      "The shared-memory segment file ('' when not publishing or not attached).");
  m.def("allocator_backend", &allocator_backend,
        "torch's CUDA allocator backend: 'native', 'cudaMallocAsync' or 'pluggable'.");
}

}  // namespace vramscope::agent
