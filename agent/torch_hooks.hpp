// agent/torch_hooks.hpp -- the thin layer over c10's CUDA caching allocator
//
// Everything that touches torch's C++ API is behind these functions, so the bindings and
// the torch-free core never see a c10 type. They call the torch-facing library loaded by
// load_torch_library() (agent/torchlib/, through its C table: torch_bridge.cpp); the extension
// itself includes no torch header and links no torch library. Functions that may fail in torch
// throw std::runtime_error with torch's message, or return empty, as documented; before a
// library is loaded every one of them throws (or returns empty) saying so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vramscope/attribution/op_registry.hpp"
#include "vramscope/attribution/segment_view.hpp"
#include "vramscope/attribution/session.hpp"
#include "vramscope/tracking/agent_core.hpp"
#include "vramscope/tracking/device_producer.hpp"
#include "vramscope/tracking/events.hpp"

namespace vramscope::agent {

/// dlopens the torch-facing library at `path` (built for the imported torch: the caller chose
/// it by torch's version) and returns the torch version it was compiled against. Throws
/// std::runtime_error when it cannot be loaded or was built from other sources; a second call
/// with the same path returns the same answer, with another path throws.
std::string load_torch_library(const std::string& path);

/// The torch version of the loaded library; throws std::runtime_error when none is loaded.
std::string loaded_torch_version();

/// Makes every allocation and free of torch's CPU tensors call the tracker
/// attach_trace_tracker() would attach, as device 0's events (agent/torchlib/cpu_proxy.cpp):
/// the agent's events without a GPU, for benchmarks and tests. Cannot be undone.
void attach_cpu_proxy_tracker(tracking::TrackerTarget target);

/// The allocator backend's name: "native", "cudaMallocAsync" or "pluggable".
std::string allocator_backend();

/// CUDA devices visible to this process (0 without a driver or device; never throws).
int cuda_device_count();

/// Has torch's CUDA lazy init created the per-device allocators? Trackers attached before
/// that would silently receive nothing.
bool allocator_initialised();

/// getDeviceStats(device) aggregate counters; empty when torch refuses (pluggable allocator).
std::optional<tracking::TorchStats> read_device_stats(std::size_t device) noexcept;

/// A DeviceCounters probe: `context` is the CUDA device index. One getDeviceStats() copy,
/// taken from inside the tracker callback, where torch's recursive allocator lock of that
/// device is already held by the calling thread (so it never waits). Never throws.
bool read_totals_in_callback(void* context, tracking::AllocatorTotals* out) noexcept;

/// allocated_bytes.current of `device` (one getDeviceStats copy, ~35 ns). Throws on failure.
uint64_t allocated_bytes_now(std::size_t device);

/// Attaches a trace tracker that applies every event to its device's producer in `target`, whose
/// storage must stay valid for the life of the process (torch cannot detach a tracker). The
/// tracker carries the pointer itself and inlines the producer's work,
/// so an event costs one call from torch and no global lookup (see
/// vramscope/tracking/device_producer.hpp). Throws std::runtime_error when the backend refuses
/// (cudaMallocAsync, pluggable).
void attach_trace_tracker(tracking::TrackerTarget target);

/// What the OOM observer hands on: the context given to attach_oom_observer(), then device,
/// rounded request, device total, device free.
using OomSink = void (*)(void* context, std::size_t device, uint64_t requested_bytes,
                         uint64_t device_total_bytes, uint64_t device_free_bytes) noexcept;

/// Attaches an out-of-memory observer that calls sink(context, ...); `context` must stay valid
/// for the life of the process (torch cannot detach an observer). Throws std::runtime_error
/// when the backend refuses.
void attach_oom_observer(OomSink sink, void* context, std::size_t device_count);

/// torch.cuda.empty_cache() for the default pool.
void empty_cache();

/// The allocator's segments now (c10 snapshot without traces), at most `max_blocks` blocks.
/// Allowed in the OOM observer (it allocates host memory only). Throws std::runtime_error.
std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks);

/// torch's RecordFunction as the attribution session's op switch: one global callback per
/// sampling probability, added on its first use and afterwards only disabled and re-enabled
/// (removeCallback is unsafe while other threads run ops). The callback's start interns the
/// op's name into the registry given to set_registry() and pushes it on the thread's op stack;
/// its end pops it.
class RecordFunctionSwitch final : public attribution::OpSwitch {
 public:
  /// The registry the callbacks intern names into: the attribution session's, which is made
  /// after this switch (it takes the switch). Set before the first enable(); it must outlive
  /// the process's ops (the session is never freed once attached).
  void set_registry(attribution::OpRegistry& registry) noexcept { m_registry = &registry; }
  void enable(double sampling) override;
  void disable() override;

 private:
  attribution::OpRegistry* m_registry = nullptr;
  /// at::CallbackHandle per sampling probability, and the enabled one (0: none).
  std::map<double, uint64_t> m_callbacks;
  uint64_t m_enabled = 0;
};

/// Do the loaded torch's trace entries carry their pool (torch 2.8+: private pools counted)?
bool trace_entries_carry_pools();

#if VRAMSCOPE_BENCH_HOOKS
/// Benchmark support: attaches a trace tracker that does nothing, the floor against which the
/// agent's own per-event cost is measured (torch builds a TraceEntry for any tracker).
void attach_noop_trace_tracker();

/// Benchmark support: `pairs` raw_alloc + raw_delete pairs of `size_bytes` on the current device
/// through the caching allocator, timed in C++; returns nanoseconds per pair.
double time_alloc_pairs(std::size_t pairs, std::size_t size_bytes);

/// Benchmark support: skips (true) or resumes (false) the tracker's work. The flag is the
/// torch-facing library's, where the tracker runs (vramscope/tracking/bench_gate.hpp).
void pause_torch_tracker(bool paused);
#endif

}  // namespace vramscope::agent
