// agent/torchlib/torch_library.cpp -- the torch-facing library: trace tracker, OOM observer, stats and RecordFunction over c10 (torch 2.8+)
//
// Compiled once per torch build (python/vramscope/_torchlib.py: the wheel's torch minors, or the
// user's torch on first use) and loaded by the Python extension through torch_api.h. Only
// c10/cuda/CUDACachingAllocator.h and ATen/record_function.h are included, and types are spelled
// through c10::cuda::CUDACachingAllocator, which compiles against 2.8 .. 2.15 (2.11 moved the
// types to c10/core/CachingDeviceAllocator.h and re-exports them there). What differs between
// releases is under #if on torch/version.h's TORCH_VERSION_*: snapshot()'s include_traces
// (2.11). A mempool is spelled {0, 0}: MempoolId_t is c10::cuda's up to 2.8, c10's after.
#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/version.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <type_traits>

#include "torch_api.h"
#include "trace_tracker.hpp"
#include "vramscope/version.hpp"

#ifndef TORCH_VERSION_MINOR
#error "torch/version.h defines no TORCH_VERSION_MINOR: the #if below need it"
#endif
#ifndef VRAMSCOPE_TORCH_VERSION
#error "VRAMSCOPE_TORCH_VERSION must be defined by the build (python/vramscope/_torchlib.py)"
#endif

namespace vramscope::torchlib {
namespace alloc = c10::cuda::CUDACachingAllocator;

// tracking::action_from_raw() reads torch's action numbers as they are (2.8 to 2.15 agree; 2.15
// appended ANNOTATE, read as Unknown). A torch that renumbers them fails to compile here rather
// than count frees as allocations.
using Entry = alloc::TraceEntry;
static_assert(Entry::ALLOC == static_cast<int>(tracking::Action::Alloc) &&
                  Entry::FREE_REQUESTED == static_cast<int>(tracking::Action::FreeRequested) &&
                  Entry::FREE_COMPLETED == static_cast<int>(tracking::Action::FreeCompleted) &&
                  Entry::SEGMENT_ALLOC == static_cast<int>(tracking::Action::SegmentAlloc) &&
                  Entry::SEGMENT_FREE == static_cast<int>(tracking::Action::SegmentFree) &&
                  Entry::SEGMENT_MAP == static_cast<int>(tracking::Action::SegmentMap) &&
                  Entry::SEGMENT_UNMAP == static_cast<int>(tracking::Action::SegmentUnmap) &&
                  Entry::SNAPSHOT == static_cast<int>(tracking::Action::Snapshot) &&
                  Entry::OOM == static_cast<int>(tracking::Action::Oom),
              "torch's TraceEntry::Action numbers differ from tracking::Action");

namespace {

/// The extension's attribution::current_op (set before any tracker is attached).
std::atomic<VramscopeCurrentOp> current_op_hook{nullptr};
/// The extension's op callbacks (set before RecordFunction's callback is added).
std::atomic<VramscopeOpStarted> op_started_hook{nullptr};
std::atomic<VramscopeOpEnded> op_ended_hook{nullptr};

uint32_t current_op() noexcept {
  const VramscopeCurrentOp fn = current_op_hook.load(std::memory_order_relaxed);
  return fn == nullptr ? 0 : fn();
}

/// Runs `fn`; false with torch's message in `error` when it throws.
template <typename Fn>
bool guarded(VramscopeTorchError* error, Fn&& fn) noexcept {
  try {
    fn();
    return true;
  } catch (const std::exception& e) {
    set_error(error, e.what());
  } catch (...) {
    set_error(error, "unknown error");
  }
  return false;
}

bool allocator_backend(char* out, std::size_t capacity, VramscopeTorchError* error) {
  return guarded(error, [&] {
    const std::string name = alloc::name();
    if (capacity == 0) return;
    const std::size_t n = name.size() < capacity - 1 ? name.size() : capacity - 1;
    std::memcpy(out, name.data(), n);
    out[n] = '\0';
  });
}

int cuda_device_count() {
  try {
    return static_cast<int>(c10::cuda::device_count());
  } catch (...) {
    return 0;
  }
}

bool allocator_initialised() {
  // Before lazy init the native allocator has no per-device state and getDeviceStats(0)
  // throws "Invalid device argument"; afterwards it is a cheap copy.
  try {
    static_cast<void>(alloc::getDeviceStats(0));
    return true;
  } catch (...) {
    return false;
  }
}

uint64_t non_negative(int64_t value) { return value > 0 ? static_cast<uint64_t>(value) : 0; }

bool read_device_stats(std::size_t device, VramscopeTorchStats* out) {
  try {
    const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    constexpr std::size_t all = 0;  // StatType::AGGREGATE
    out->allocated_bytes = non_negative(stats.allocated_bytes[all].current);
    out->peak_allocated_bytes = non_negative(stats.allocated_bytes[all].peak);
    out->reserved_bytes = non_negative(stats.reserved_bytes[all].current);
    out->peak_reserved_bytes = non_negative(stats.reserved_bytes[all].peak);
    out->requested_bytes = non_negative(stats.requested_bytes[all].current);
    out->peak_requested_bytes = non_negative(stats.requested_bytes[all].peak);
    out->active_bytes = non_negative(stats.active_bytes[all].current);
    out->inactive_split_bytes = non_negative(stats.inactive_split_bytes[all].current);
    return true;
  } catch (...) {
    return false;
  }
}

bool read_totals_in_callback(void* context, tracking::AllocatorTotals* out) {
  try {
    const auto device = static_cast<c10::DeviceIndex>(reinterpret_cast<std::uintptr_t>(context));
    const auto stats = alloc::getDeviceStats(device);
    constexpr std::size_t all = 0;  // StatType::AGGREGATE
    out->allocated_bytes = non_negative(stats.allocated_bytes[all].current);
    out->active_bytes = non_negative(stats.active_bytes[all].current);
    return true;
  } catch (...) {
    return false;
  }
}

bool allocated_bytes_now(std::size_t device, uint64_t* out, VramscopeTorchError* error) {
  return guarded(error, [&] {
    *out = non_negative(
        alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device)).allocated_bytes[0].current);
  });
}

bool attach_trace_tracker(const tracking::TrackerTarget* target, VramscopeCurrentOp op,
                          VramscopeTorchError* error) {
  return guarded(error,
                 [&] { alloc::attachAllocatorTraceTracker(make_trace_tracker(*target, op)); });
}

bool attach_oom_observer(VramscopeOomSink sink, void* context, std::size_t device_count,
                         VramscopeTorchError* error) {
  // Runs on the allocating thread after torch released the allocator lock, just before the
  // OutOfMemoryError is thrown: reading stats is allowed, allocating on the GPU is not.
  auto observer = [sink, context, device_count](int64_t device, size_t allocated,
                                                size_t device_total, size_t device_free) {
    if (device < 0 || static_cast<std::size_t>(device) >= device_count) return;
    sink(context, static_cast<std::size_t>(device), allocated, device_total, device_free);
  };
  return guarded(error, [&] { alloc::attachOutOfMemoryObserver(std::move(observer)); });
}

bool empty_cache(VramscopeTorchError* error) {
  return guarded(error, [] { alloc::emptyCache(); });
}

uint8_t state_of(const alloc::BlockInfo& block) {
  if (block.allocated) return 0;  // attribution::BlockState::ActiveAllocated
  if (block.active) return 1;     // ActivePendingFree
  return 2;                       // Inactive
}

bool capture_segments(std::size_t max_blocks, void* context, VramscopeSegmentSink sink,
                      VramscopeTorchError* error) {
  return guarded(error, [&] {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
    // 2.11 added include_traces (default true): the traces are not wanted here.
    const auto info = alloc::snapshot({0, 0}, false);
#else
    const auto info = alloc::snapshot({0, 0});
#endif
    std::size_t blocks = 0;
    std::vector<VramscopeTorchBlock> out;
    for (const auto& segment : info.segments) {
      VramscopeTorchSegment s{};
      s.device = static_cast<int32_t>(segment.device);
      s.address = segment.address;
      s.total_bytes = segment.total_size;
      s.requested_bytes = segment.requested_size;
      s.allocated_bytes = segment.allocated_size;
      s.active_bytes = segment.active_size;
      s.stream = reinterpret_cast<uint64_t>(segment.stream);
      s.is_large = segment.is_large;
      s.is_expandable = segment.is_expandable;
      out.clear();
      for (const auto& block : segment.blocks) {
        if (blocks++ >= max_blocks) break;
        out.push_back({block.size, block.requested_size, state_of(block)});
      }
      sink(context, &s, out.data(), out.size());
    }
  });
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  const char* name = fn.name();
  const VramscopeOpStarted started = op_started_hook.load(std::memory_order_relaxed);
  if (started != nullptr) started(name, std::strlen(name), &fn);
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  const VramscopeOpEnded ended = op_ended_hook.load(std::memory_order_relaxed);
  if (ended != nullptr) ended(&fn);
}

static_assert(std::is_same_v<at::CallbackHandle, uint64_t>, "handles cross the C table as uint64");

bool add_op_callback(double sampling, VramscopeOpStarted started, VramscopeOpEnded ended,
                     uint64_t* handle, VramscopeTorchError* error) {
  op_started_hook.store(started, std::memory_order_relaxed);
  op_ended_hook.store(ended, std::memory_order_relaxed);
  return guarded(error, [&] {
    *handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .samplingProb(sampling)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  });
}

void reenable_op_callback(uint64_t handle) { at::reenableCallback(handle); }
void disable_op_callback(uint64_t handle) { at::disableCallback(handle); }

bool attach_noop_tracker(VramscopeTorchError* error) {
  return guarded(error,
                 [] { alloc::attachAllocatorTraceTracker([](const alloc::TraceEntry&) {}); });
}

bool time_alloc_pairs(std::size_t pairs, std::size_t size_bytes, double* ns_per_pair,
                      VramscopeTorchError* error) {
  return guarded(error, [&] {
    // One warm pair so the first timed pair does not pay for a cudaMalloc of a new segment.
    alloc::raw_delete(alloc::raw_alloc(size_bytes));
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < pairs; ++i) alloc::raw_delete(alloc::raw_alloc(size_bytes));
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    *ns_per_pair = elapsed.count() / static_cast<double>(pairs);
  });
}

void pause_tracking([[maybe_unused]] bool paused) {
#if VRAMSCOPE_BENCH_HOOKS
  tracking::pause_tracking(paused);
#endif
}

/// Do this torch's trace entries carry the pool of their block (TraceEntry::mempool_, 2.8+)?
template <typename Entry>
inline constexpr bool entry_has_pool = requires(const Entry& e) {
  e.mempool_.first;
};

bool trace_entries_carry_pools() { return entry_has_pool<alloc::TraceEntry>; }

constexpr VramscopeTorchApi api{
    VRAMSCOPE_TORCH_VERSION,    &allocator_backend,
    &cuda_device_count,         &allocator_initialised,
    &read_device_stats,         &read_totals_in_callback,
    &allocated_bytes_now,       &attach_trace_tracker,
    &attach_oom_observer,       &empty_cache,
    &capture_segments,          &add_op_callback,
    &reenable_op_callback,      &disable_op_callback,
    &attach_cpu_proxy,          &attach_noop_tracker,
    &time_alloc_pairs,          &pause_tracking,
    &trace_entries_carry_pools,
};

}  // namespace

void set_error(VramscopeTorchError* error, const char* message) noexcept {
  if (error == nullptr) return;
  std::size_t n = 0;
  while (message[n] != '\0' && message[n] != '\n' && n + 1 < sizeof(error->message)) ++n;
  std::memcpy(error->message, message, n);
  error->message[n] = '\0';
}

alloc::AllocatorTraceTracker make_trace_tracker(tracking::TrackerTarget target,
                                                VramscopeCurrentOp op) {
  current_op_hook.store(op, std::memory_order_relaxed);
  // Runs on whichever thread allocates or frees, with that device's allocator mutex held:
  // no GIL, no allocation, no locks, no calls back into the allocator -- only the producer's
  // relaxed atomics and its preallocated buffers. The closure (two words) fits std::function's
  // inline storage, which torch reads anyway to make the call; std::function's invoker, which
  // inlines the producer's work, is instantiated here (this file is built at -O3).
  auto tracker = [target](const alloc::TraceEntry& entry) {
    target.on_trace_entry(static_cast<int64_t>(entry.device_), static_cast<int64_t>(entry.action_),
                          static_cast<uint64_t>(entry.size_), static_cast<uint64_t>(entry.addr_),
                          [] { return current_op(); });
    if constexpr (entry_has_pool<alloc::TraceEntry>) {
      // Private pools (CUDA graphs, MemPool): one branch on two words torch just wrote.
      if ((entry.mempool_.first | entry.mempool_.second) != 0) [[unlikely]]
        target.on_private_pool_entry(static_cast<int64_t>(entry.device_),
                                     static_cast<int64_t>(entry.action_),
                                     static_cast<uint64_t>(entry.size_));
    }
  };
  static_assert(sizeof(tracker) == 2 * sizeof(void*), "the closure must stay two words");
  return tracker;
}

}  // namespace vramscope::torchlib

extern "C" __attribute__((visibility("default"))) const VramscopeTorchApi* vramscope_torch_api(
    uint32_t api_version, const char* vramscope_version, uint64_t layout) {
  if (api_version != VRAMSCOPE_TORCH_API_VERSION || vramscope_version == nullptr ||
      std::strcmp(vramscope_version, VRAMSCOPE_VERSION) != 0 || layout != vramscope_torch_layout())
    return nullptr;
  return &vramscope::torchlib::api;
}
