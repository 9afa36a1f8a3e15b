// src/backends/include/vramscope/backends/open_sampler.hpp -- opening the driver view: the NVML backend, and a Sampler over it and the agents' segments
//
// The Sampler and the DeviceBackend interface are core's (vramscope/sampler.hpp,
// vramscope/backend.hpp); this layer knows the concrete parts: NVML (dlopened) and format's
// segment reader.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "vramscope/backend.hpp"
#include "vramscope/sampler.hpp"
#include "vramscope/status.hpp"

namespace vramscope {

/// Options for the NVML backend.
struct NvmlOptions {
  /// Library to dlopen; empty means $VRAMSCOPE_NVML_LIBRARY, then libnvidia-ml.so.1, then
  /// libnvidia-ml.so. The CUDA toolkit's stub library is refused.
  std::string library_path;
  /// Resolve user and command of each process from /proc (costs a few syscalls per process).
  bool resolve_processes = true;
  /// BAR1 is read at most this often and repeated in between: the call costs ~160 µs on an
  /// H200 (40x the memory call) and the mapping window changes only when mappings do.
  int64_t bar1_refresh_ns = 1'000'000'000;
  /// The device memory and the three process lists (one driver reading: 15-20 µs of CPU after
  /// a sleep on an H100, the lists ~9 µs each) are read when this long has passed (a quarter
  /// of it early counts, for the scheduler's jitter at this very interval) and repeated in
  /// between, unless DeviceBackend::mark_changed() was called since the last reading (the
  /// Sampler calls it when an allocator's reserved bytes moved); 0 reads them every sample.
  /// Sampling at 1 kHz then costs a wake-up and the agents' segments, not the driver's calls.
  int64_t driver_refresh_ns = 10'000'000;
};

/// dlopens NVML and initialises it. Never throws.
BackendOpenResult open_nvml_backend(const NvmlOptions& options = {});

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

/// Turns a failed backend open into the error a command should end with: exit 3 for "no driver,
/// no NVML library, no GPU", exit 1 otherwise, with one line saying what to do.
Error backend_open_error(BackendFailure failure, const std::string& message);

/// Opens NVML (and the agent reader unless disabled). Throws vramscope::Error (see
/// backend_open_error) when the driver view is unavailable.
std::unique_ptr<Sampler> open_sampler(const SamplerOptions& options = {});

}  // namespace vramscope
