// agent/torch_hooks.cpp -- trace tracker, OOM observer and getDeviceStats glue (torch 2.2+)
//
// Only c10/cuda/CUDACachingAllocator.h is included, and types are spelled through
// c10::cuda::CUDACachingAllocator, which compiles against 2.2 .. 2.11 (2.11 moved the types
// to c10/core/CachingDeviceAllocator.h and re-exports them there).
#include "torch_hooks.hpp"

#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "trace_tracker.hpp"
#include "vramscope/attribution/op_registry.hpp"

namespace vramscope::agent {
namespace alloc = c10::cuda::CUDACachingAllocator;

namespace {

/// The first line of a c10 error: its what() appends a C++ backtrace we do not want to show.
std::string first_line(const char* message) {
  std::string text(message == nullptr ? "" : message);
  const std::size_t newline = text.find('\n');
  return newline == std::string::npos ? text : text.substr(0, newline);
}

}  // namespace

std::string allocator_backend() {
  try {
    return alloc::name();
  } catch (const std::exception& error) {
    return "unknown (" + first_line(error.what()) + ")";
  }
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

std::optional<tracking::TorchStats> read_device_stats(std::size_t device) noexcept {
  try {
    const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    constexpr std::size_t all = 0;  // StatType::AGGREGATE
    const auto current = [](const auto& stat) {
      return stat.current > 0 ? static_cast<uint64_t>(stat.current) : uint64_t{0};
    };
    const auto peak = [](const auto& stat) {
      return stat.peak > 0 ? static_cast<uint64_t>(stat.peak) : uint64_t{0};
    };
    tracking::TorchStats out;
    out.allocated_bytes = current(stats.allocated_bytes[all]);
    out.peak_allocated_bytes = peak(stats.allocated_bytes[all]);
    out.reserved_bytes = current(stats.reserved_bytes[all]);
    out.peak_reserved_bytes = peak(stats.reserved_bytes[all]);
    out.requested_bytes = current(stats.requested_bytes[all]);
    out.peak_requested_bytes = peak(stats.requested_bytes[all]);
    out.active_bytes = current(stats.active_bytes[all]);
    out.inactive_split_bytes = current(stats.inactive_split_bytes[all]);
    return out;
  } catch (...) {
    return std::nullopt;
  }
}

bool read_totals_in_callback(void* context, tracking::AllocatorTotals* out) noexcept {
  try {
    const auto device = static_cast<c10::DeviceIndex>(reinterpret_cast<std::uintptr_t>(context));
    const auto stats = alloc::getDeviceStats(device);
    constexpr std::size_t all = 0;  // StatType::AGGREGATE
    const int64_t allocated = stats.allocated_bytes[all].current;
    const int64_t active = stats.active_bytes[all].current;
    out->allocated_bytes = allocated > 0 ? static_cast<uint64_t>(allocated) : 0;
    out->active_bytes = active > 0 ? static_cast<uint64_t>(active) : 0;
    return true;
  } catch (...) {
    return false;
  }
}

uint64_t allocated_bytes_now(std::size_t device) {
  try {
    const int64_t current =
        alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device)).allocated_bytes[0].current;
    return current > 0 ? static_cast<uint64_t>(current) : 0;
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
}

alloc::AllocatorTraceTracker make_trace_tracker(tracking::TrackerTarget target) {
  // Runs on whichever thread allocates or frees, with that device's allocator mutex held:
  // no GIL, no allocation, no locks, no calls back into the allocator -- only the producer's
  // relaxed atomics and its preallocated buffers. The closure (two words) fits std::function's
  // inline storage, which torch reads anyway to make the call; std::function's invoker, which
  // inlines the producer's work, is instantiated here (this file is built at -O3).
  auto tracker = [target](const alloc::TraceEntry& entry) {
    target.on_trace_entry(static_cast<int64_t>(entry.device_), static_cast<int64_t>(entry.action_),
                          static_cast<uint64_t>(entry.size_), static_cast<uint64_t>(entry.addr_),
                          [] { return attribution::current_op(); });
  };
  static_assert(sizeof(tracker) == 2 * sizeof(void*), "the closure must stay two words");
  return tracker;
}

void attach_trace_tracker(tracking::TrackerTarget target) {
  try {
    alloc::attachAllocatorTraceTracker(make_trace_tracker(target));
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
}

void attach_oom_observer(OomSink sink, void* context, std::size_t device_count) {
  // Runs on the allocating thread after torch released the allocator lock, just before the
  // OutOfMemoryError is thrown: reading stats is allowed, allocating on the GPU is not.
  auto observer = [sink, context, device_count](int64_t device, size_t allocated,
                                                size_t device_total, size_t device_free) {
    if (device < 0 || static_cast<std::size_t>(device) >= device_count) return;
    sink(context, static_cast<std::size_t>(device), allocated, device_total, device_free);
  };
  try {
    alloc::attachOutOfMemoryObserver(std::move(observer));
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
}

void empty_cache() {
  try {
    alloc::emptyCache();
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
}

namespace {

attribution::BlockState state_of(const alloc::BlockInfo& block) {
  if (block.allocated) return attribution::BlockState::ActiveAllocated;
  if (block.active) return attribution::BlockState::ActivePendingFree;
  return attribution::BlockState::Inactive;
}

/// The registry the op callbacks intern names into, published by RecordFunctionSwitch::enable()
/// before a callback can run: RecordFunction callbacks are plain functions, without a context.
std::atomic<attribution::OpRegistry*> op_registry{nullptr};

/// Runs for each op scope on any thread: the RecordFunction identifies the scope, so that the
/// end matches its start. Never throws.
std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  // Only an attached session enables the callback, so there is a registry; the check is a load.
  attribution::OpRegistry* registry = op_registry.load(std::memory_order_acquire);
  if (registry == nullptr) return nullptr;
  try {
    const uint32_t id = registry->intern(fn.name());
    registry->count_call(id);
    attribution::push_op(&fn, id);
  } catch (...) {
    // Interning allocates; an op must not fail because attribution could not name it.
  }
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  attribution::pop_op(&fn);
}

}  // namespace

std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks) {
  std::vector<attribution::SegmentView> out;
  try {
    const auto info = alloc::snapshot(c10::MempoolId_t{0, 0}, false);
    std::size_t blocks = 0;
    out.reserve(info.segments.size());
    for (const auto& segment : info.segments) {
      attribution::SegmentView s;
      s.device = static_cast<int32_t>(segment.device);
      s.address = segment.address;
      s.total_bytes = segment.total_size;
      s.requested_bytes = segment.requested_size;
      s.allocated_bytes = segment.allocated_size;
      s.active_bytes = segment.active_size;
      s.stream = reinterpret_cast<uint64_t>(segment.stream);
      s.is_large = segment.is_large;
      s.is_expandable = segment.is_expandable;
      for (const auto& block : segment.blocks) {
        if (blocks++ >= max_blocks) break;
        s.blocks.push_back({block.size, block.requested_size, state_of(block)});
      }
      out.push_back(std::move(s));
    }
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
  return out;
}

static_assert(std::is_same_v<at::CallbackHandle, uint64_t>,
              "RecordFunctionSwitch keeps handles as uint64_t");

void RecordFunctionSwitch::enable(double sampling) {
  op_registry.store(m_registry, std::memory_order_release);
  auto found = m_callbacks.find(sampling);
  if (found == m_callbacks.end()) {
    const at::CallbackHandle handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&on_op_start, &on_op_end)
            .samplingProb(sampling)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
    found = m_callbacks.emplace(sampling, handle).first;
  } else {
    at::reenableCallback(found->second);
  }
  m_enabled = found->second;
}

void RecordFunctionSwitch::disable() {
  if (m_enabled == 0) return;
  at::disableCallback(m_enabled);
  m_enabled = 0;
}

#if VRAMSCOPE_BENCH_HOOKS
void attach_noop_trace_tracker() {
  try {
    alloc::attachAllocatorTraceTracker([](const alloc::TraceEntry&) {});
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
}

double time_alloc_pairs(std::size_t pairs, std::size_t size_bytes) {
  if (pairs == 0 || size_bytes == 0)
    throw std::invalid_argument("pairs and size_bytes must be > 0");
  try {
    // One warm pair so the first timed pair does not pay for a cudaMalloc of a new segment.
    alloc::raw_delete(alloc::raw_alloc(size_bytes));
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < pairs; ++i) alloc::raw_delete(alloc::raw_alloc(size_bytes));
    const std::chrono::duration<double, std::nano> elapsed =
        std::chrono::steady_clock::now() - start;
    return elapsed.count() / static_cast<double>(pairs);
  } catch (const std::exception& error) {
    throw std::runtime_error(first_line(error.what()));
  }
}

#endif  // VRAMSCOPE_BENCH_HOOKS

}  // namespace vramscope::agent
