// include/vramscope/sampler.hpp -- one look at every GPU and every live agent, as a SystemSample
//
// The Sampler is what commands hold: it owns the driver backend and the agent-segment reader and
// stitches their outputs together with a timestamp and the host name. It never formats anything.
// Commands open one with open_sampler() (backends: vramscope/backends/open_sampler.hpp), which
// puts NVML and format's segment reader into it: core links neither.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "vramscope/agent_segment.hpp"
#include "vramscope/backend.hpp"
#include "vramscope/sample.hpp"

namespace vramscope {

/// Fills SystemSamples from a device backend and, optionally, the agents' segments.
/// Not thread-safe: one thread samples.
class Sampler {
 public:
  /// `agents` may be null (no agent view).
  Sampler(std::unique_ptr<DeviceBackend> backend, std::unique_ptr<AgentSegmentReader> agents);
  /// Replaces `out` with the current state: timestamp, host, driver version, every device,
  /// every live agent's allocator stats and the steps and OOMs not reported by earlier calls.
  void sample(SystemSample& out);
  /// Driver version of the backend ("" when unknown).
  const std::string& driver_version() const { return m_driver_version; }
  /// This machine's host name.
  const std::string& hostname() const { return m_hostname; }
  /// Where the agent reader's warnings go (open_sampler() sets SamplerOptions::on_warning).
  void set_warning_handler(std::function<void(const std::string&)> handler) {
    m_on_warning = std::move(handler);
  }

 private:
  std::unique_ptr<DeviceBackend> m_backend;
  std::unique_ptr<AgentSegmentReader> m_agents;
  std::string m_driver_version;
  std::string m_hostname;
  std::function<void(const std::string&)> m_on_warning;
  /// reserved_signature() of the last sample's allocators.
  uint64_t m_reserved_signature = 0;
};

/// A hash of which allocators there are and their reserved bytes: equal between two samples
/// when no allocator came, went or moved its reserved bytes (the Sampler's cue to read the
/// driver afresh).
uint64_t reserved_signature(const std::vector<AllocatorSample>& allocators);

/// gethostname(), or "" when it fails.
std::string local_hostname();

}  // namespace vramscope
