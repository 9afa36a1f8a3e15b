// agent/bindings/agent_module.cpp -- vramscope._agent: the module, defined area by area (bindings.hpp)
//
// The API is specified in docs/agent-api.md (the contract with python/vramscope). Devices are
// CUDA ordinals; no torch object crosses this boundary. The attached state and its lifetime
// are AgentState's (agent_state.cpp); this folder reaches it and converts records to Python.
#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>

#include "bindings.hpp"

namespace nb = nanobind;

namespace vramscope::agent {

Attachment& attached() { return AgentState::instance().attached(); }

Attachment* attached_or_null() noexcept { return AgentState::instance().attached_or_null(); }

std::size_t checked_device(const Attachment& state, int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= state.core->device_count()) {
    throw nb::index_error(("CUDA device " + std::to_string(device) + " out of range: " +
                           std::to_string(state.core->device_count()) + " tracked")
                              .c_str());
  }
  return static_cast<std::size_t>(device);
}

}  // namespace vramscope::agent

NB_MODULE(_agent, m) {
  using namespace vramscope::agent;
  m.doc() = "vramscope's in-process PyTorch allocator agent (see docs/agent-api.md).";

  bind_torch(m);
  bind_attach(m);
  bind_memory(m);
  bind_steps(m);
  bind_attribution(m);
  bind_attribution_tables(m);
  bind_oom(m);
  bind_tensorboard(m);
  bind_driver(m);
  bind_polling(m);
  bind_bench(m);
  m.def(
      "_shutdown", [] { AgentState::instance().shutdown(); },
      "Stop the agent thread and remove the segment, the agent's or the polling one (run at "
      "exit).");

  nb::module_::import_("atexit").attr("register")(m.attr("_shutdown"));
}
