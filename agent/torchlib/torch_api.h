// agent/torchlib/torch_api.h -- the C interface between the Python extension and the torch-facing library
//
// The agent is two shared objects. The torch-facing library (agent/torchlib/, one per torch
// build: compiled against that torch's headers and linked to its libc10_cuda.so) is the only
// code that includes torch; the Python extension (nanobind, one per CPython, no torch headers)
// dlopens the library that matches the imported torch and calls it through this table. Only C
// types and the tracking layer's plain structs cross it, never a C++ standard library object or
// an exception: the two sides may be built by different compilers, against different libstdc++
// ABI settings (a source build of torch with _GLIBCXX_USE_CXX11_ABI=0), years apart.
//
// Both sides compile the tracking layer's headers from the same source (the wheel ships them
// together; a library compiled on first use is compiled from the sources the wheel carries), and
// vramscope_torch_api() refuses a caller whose version or struct layout differ.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vramscope/tracking/device_producer.hpp"

extern "C" {

/// Bumped whenever a field of VramscopeTorchApi changes.
#define VRAMSCOPE_TORCH_API_VERSION 3u

/// Why a call failed: torch's message, first line only.
struct VramscopeTorchError {
  char message[480];
};

/// getDeviceStats()'s aggregate counters (tracking::TorchStats).
struct VramscopeTorchStats {
  uint64_t allocated_bytes;
  uint64_t peak_allocated_bytes;
  uint64_t reserved_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t requested_bytes;
  uint64_t peak_requested_bytes;
  uint64_t active_bytes;
  uint64_t inactive_split_bytes;
};

/// One segment of the caching allocator (attribution::SegmentView without its blocks).
struct VramscopeTorchSegment {
  int32_t device;
  uint64_t address;
  uint64_t total_bytes;
  uint64_t requested_bytes;
  uint64_t allocated_bytes;
  uint64_t active_bytes;
  uint64_t stream;
  /// Large pool (blocks > 1 MiB)?
  bool is_large;
  bool is_expandable;
};

/// One block of a segment; `state` is an attribution::BlockState.
struct VramscopeTorchBlock {
  uint64_t size_bytes;
  uint64_t requested_bytes;
  uint8_t state;
};

/// Receives one segment and its blocks (valid during the call only).
typedef void (*VramscopeSegmentSink)(void* context, const VramscopeTorchSegment* segment,
                                     const VramscopeTorchBlock* blocks, size_t block_count);
/// The calling thread's innermost op (attribution::current_op, in the extension).
typedef uint32_t (*VramscopeCurrentOp)(void);
/// The RecordFunction callbacks' targets (torch_bridge.cpp's, in the extension: they intern the
/// op's name into the attribution session's registry and push and pop the thread's op stack).
typedef void (*VramscopeOpStarted)(const char* name, size_t name_size, const void* scope);
typedef void (*VramscopeOpEnded)(const void* scope);
/// The OOM observer's target: the context given with it, then device, rounded request, device
/// total, device free.
typedef void (*VramscopeOomSink)(void* context, size_t device, uint64_t requested_bytes,
                                 uint64_t device_total_bytes, uint64_t device_free_bytes);

/// What the torch-facing library offers. Functions returning bool fill `error` on false.
struct VramscopeTorchApi {
  /// torch.__version__ of the torch it was compiled against (e.g. "2.11.0+cu130").
  const char* torch_version;
  /// "native", "cudaMallocAsync" or "pluggable" into `out` (NUL-terminated, cut at `capacity`).
  bool (*allocator_backend)(char* out, size_t capacity, VramscopeTorchError* error);
  /// CUDA devices visible (0 without a driver or device).
  int (*cuda_device_count)(void);
  /// Has torch's CUDA lazy init created the per-device allocators?
  bool (*allocator_initialised)(void);
  /// getDeviceStats(device)'s aggregate counters; false when torch refuses.
  bool (*read_device_stats)(size_t device, VramscopeTorchStats* out);
  /// The DeviceCounters probe (see torch_hooks.hpp), called from inside the tracker.
  bool (*read_totals_in_callback)(void* context, vramscope::tracking::AllocatorTotals* out);
  bool (*allocated_bytes_now)(size_t device, uint64_t* out, VramscopeTorchError* error);
  /// Attaches the trace tracker to torch's caching allocator (see torch_hooks.hpp).
  bool (*attach_trace_tracker)(const vramscope::tracking::TrackerTarget* target,
                               VramscopeCurrentOp current_op, VramscopeTorchError* error);
  bool (*attach_oom_observer)(VramscopeOomSink sink, void* context, size_t device_count,
                              VramscopeTorchError* error);
  bool (*empty_cache)(VramscopeTorchError* error);
  /// Hands every segment of the allocator to `sink`, at most `max_blocks` blocks in all.
  bool (*capture_segments)(size_t max_blocks, void* context, VramscopeSegmentSink sink,
                           VramscopeTorchError* error);
  /// RecordFunction: adds a global callback with this sampling probability that calls
  /// `started` and `ended` (disabled and re-enabled afterwards, never removed).
  bool (*add_op_callback)(double sampling, VramscopeOpStarted started, VramscopeOpEnded ended,
                          uint64_t* handle, VramscopeTorchError* error);
  void (*reenable_op_callback)(uint64_t handle);
  void (*disable_op_callback)(uint64_t handle);
  /// Makes torch's CPU tensors call the very tracker attach_trace_tracker attaches, as device
  /// 0's events (cpu_proxy.cpp): the agent's events without a GPU. Cannot be undone.
  bool (*attach_cpu_proxy)(const vramscope::tracking::TrackerTarget* target,
                           VramscopeCurrentOp current_op, VramscopeTorchError* error);
  /// Benchmark support: a tracker that does nothing; ns per raw_alloc+raw_delete pair.
  bool (*attach_noop_tracker)(VramscopeTorchError* error);
  bool (*time_alloc_pairs)(size_t pairs, size_t size_bytes, double* ns_per_pair,
                           VramscopeTorchError* error);
  /// Benchmark support: pauses (true) or resumes (false) the tracker's work. The flag
  /// (vramscope/tracking/bench_gate.hpp) is this library's, where the tracker runs; a no-op
  /// without the benchmark hooks.
  void (*pause_tracking)(bool paused);
  /// Do this torch's trace entries carry their block's pool (TraceEntry::mempool_, torch 2.8+)?
  /// Then the tracker counts private pools' segments (CUDA graphs, MemPool) apart.
  bool (*trace_entries_carry_pools)(void);
};

/// The table, or null when the caller was built from another source: `api_version` must be
/// VRAMSCOPE_TORCH_API_VERSION, `vramscope_version` this library's VRAMSCOPE_VERSION and
/// `layout` its vramscope_torch_layout() (the size of the structs the tracker writes).
const VramscopeTorchApi* vramscope_torch_api(uint32_t api_version, const char* vramscope_version,
                                             uint64_t layout);
}

/// The sizes of the tracking structs both sides must agree on, and the benchmark switch that
/// changes them, in one number.
inline uint64_t vramscope_torch_layout() {
  using namespace vramscope::tracking;
  return (uint64_t{sizeof(DeviceProducer)} << 32) ^ (uint64_t{sizeof(TrackerTarget)} << 16) ^
         (uint64_t{sizeof(AllocatorTotals)} << 8) ^ uint64_t { VRAMSCOPE_BENCH_HOOKS };
}
