// include/vramscope/sampler.hpp -- one look at every GPU and every live agent, as a SystemSample
//
// The Sampler is what commands hold: it owns the driver backend and the agent-segment reader and
// stitches their outputs together with a timestamp and the host name. It never formats anything.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "vramscope/agent_segment.hpp"
#include "vramscope/backend.hpp"
#include "vramscope/sample.hpp"
#include "vramscope/status.hpp"

namespace vramscope {

/// What open_sampler() opens.
struct SamplerOptions {
  NvmlOptions nvml;
  /// Read agents' shared-memory segments? (off: driver view only)
  bool read_agents = true;
  /// Segment directory; empty means agent_segment_dir().
  std::string agent_dir;
  /// Receives warnings about agents that cannot be shown (a segment of another format version),
  /// each once; empty: they are dropped.
  std::function<void(const std::string&)> on_warning;
};

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
  /// Where the agent reader's warnings go (see SamplerOptions::on_warning).
  void set_warning_handler(std::function<void(const std::string&)> handler) {
    m_on_warning = std::move(handler);
  }

 private:
  std::unique_ptr<DeviceBackend> m_backend;
  std::unique_ptr<AgentSegmentReader> m_agents;
  std::string m_driver_version;
  std::string m_hostname;
  std::function<void(const std::string&)> m_on_warning;
};

/// Turns a failed backend open into the error a command should end with: exit 3 for "no driver,
/// no NVML library, no GPU", exit 1 otherwise, with one line saying what to do.
Error backend_open_error(BackendFailure failure, const std::string& message);

/// Opens NVML (and the agent reader unless disabled). Throws vramscope::Error (see
/// backend_open_error) when the driver view is unavailable. Defined in src/backends (the layer
/// that knows the concrete parts), not beside the Sampler: core links neither NVML nor format.
std::unique_ptr<Sampler> open_sampler(const SamplerOptions& options = {});

/// gethostname(), or "" when it fails.
std::string local_hostname();

}  // namespace vramscope
