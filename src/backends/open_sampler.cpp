// src/backends/open_sampler.cpp -- open_sampler(): NVML and the agent-segment reader, injected into a Sampler
//
// Here, not in src/core/sampler.cpp: the Sampler (core) only holds the parts it is given, and
// this is the one place that knows which concrete parts a command gets -- NVML (this layer) and
// the segment reader (src/format, beneath it). Keeping it out of core keeps core free of both.
// backend_open_error() is here too: its words are NVML's (libraries, drivers,
// VRAMSCOPE_NVML_LIBRARY).
#include "vramscope/backends/open_sampler.hpp"

#include <cstdlib>
#include <exception>
#include <memory>
#include <utility>

#include "vramscope/agent_segment.hpp"
#include "vramscope/format/agent_segments.hpp"

namespace vramscope {

namespace {

/// `message` led by `prefix` unless it already says what kind of failure it is.
std::string led_by(const std::string& prefix, const std::string& message, const char* keyword) {
  if (message.find(keyword) != std::string::npos) return message;
  return prefix + message;
}

/// Where to look next when no library could be loaded.
std::string library_hint() {
  const char* configured = std::getenv("VRAMSCOPE_NVML_LIBRARY");
  if (configured != nullptr && configured[0] != '\0') return " (from VRAMSCOPE_NVML_LIBRARY)";
  return " (set VRAMSCOPE_NVML_LIBRARY to use another NVML)";
}

}  // namespace

Error backend_open_error(BackendFailure failure, const std::string& message) {
  const std::string detail = message.empty() ? std::string("unknown reason") : message;
  switch (failure) {
    case BackendFailure::LibraryNotFound:
      return Error(led_by("no NVIDIA driver: ", detail, "driver") + library_hint(), ExitNoGpu);
    case BackendFailure::DriverNotLoaded:
      return Error(led_by("no NVIDIA driver: ", detail, "driver"), ExitNoGpu);
    case BackendFailure::NoDevices:
      return Error(led_by("no GPU: ", detail, "GPU"), ExitNoGpu);
    case BackendFailure::MissingSymbol:
      return Error("unusable NVML library: " + detail + library_hint(), ExitNoGpu);
    case BackendFailure::NoPermission:
      return Error("no permission to use NVML: " + detail, ExitError);
    case BackendFailure::None:
    case BackendFailure::Other:
      break;
  }
  return Error("cannot read GPUs: " + detail, ExitError);
}

std::unique_ptr<Sampler> open_sampler(const SamplerOptions& options) {
  NvmlOptions nvml = options.nvml;
  // Without the agents nothing says when the driver's memory moved: it is read every sample.
  if (!options.read_agents) nvml.driver_refresh_ns = 0;
  BackendOpenResult opened = open_nvml_backend(nvml);
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
      agents = open_agent_segment_reader(options.agent_dir);
    } catch (const std::exception&) {
      agents.reset();
    }
  }
  auto sampler = std::make_unique<Sampler>(std::move(opened.backend), std::move(agents));
  sampler->set_warning_handler(options.on_warning);
  return sampler;
}

}  // namespace vramscope
