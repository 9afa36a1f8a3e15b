// src/backends/open_sampler.cpp -- open_sampler(): NVML and the agent-segment reader, injected into a Sampler
//
// Here, not in src/core/sampler.cpp: the Sampler (core) only holds the parts it is given, and
// this is the one place that knows which concrete parts a command gets -- NVML (this layer) and
// the segment reader (src/format, beneath it). Keeping it out of core keeps core free of both.
#include <exception>
#include <memory>
#include <utility>

#include "vramscope/agent_segment.hpp"
#include "vramscope/backend.hpp"
#include "vramscope/sampler.hpp"

namespace vramscope {

std::unique_ptr<Sampler> open_sampler(const SamplerOptions& options) {
  BackendOpenResult opened = open_nvml_backend(options.nvml);
  if (!opened.backend) {
    throw backend_open_error(
        opened.failure == BackendFailure::None ? BackendFailure::Other : opened.failure,
        opened.message);
  }
  std::unique_ptr<AgentSegmentReader> agents;
  if (options.read_agents) {
    // A missing or unreadable segment directory only means "no agents": the driver view
    // still stands on its own.
    try {
      agents = AgentSegmentReader::create(options.agent_dir);
    } catch (const std::exception&) {
      agents.reset();
    }
  }
  auto sampler = std::make_unique<Sampler>(std::move(opened.backend), std::move(agents));
  sampler->set_warning_handler(options.on_warning);
  return sampler;
}

}  // namespace vramscope
