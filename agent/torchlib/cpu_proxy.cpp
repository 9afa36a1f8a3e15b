// agent/torchlib/cpu_proxy.cpp -- torch's CPU tensors drive the trace tracker: the agent's events without a GPU (benchmarks, tests)
//
// The cost that matters (docs/benchmarks.md) is the tracker's in a launch-bound step, where
// microseconds of interpreter and dispatcher code run between two allocator events and evict
// the callback's lines. The same small-ops loop on CPU tensors runs that same interpreter and
// dispatcher code (without the CUDA launch) between its allocations. This allocator makes each
// CPU allocation and free call the very tracker torch's caching allocator calls -- the same
// std::function and invoker (trace_tracker.hpp), with a TraceEntry built as torch builds one --
// as device 0's ALLOC, then FREE_REQUESTED and FREE_COMPLETED, the three events torch traces for
// a block freed without stream uses. bench_turns.py --step small-ops-cpu then compares the
// callback working and paused in one process, as on the GPU. It is a proxy: the share it shows
// is per event of a CPU step, and a GPU run decides. The tests (tests/wheel) count its events
// exactly under each torch the wheel serves, which checks that the tracker a library hands to
// torch is the one torch calls.
//
// TraceEntry's constructor takes a mempool since 2.4 (the form used here, 2.8 to 2.15).
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/ApproximateClock.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <utility>

#include "trace_tracker.hpp"

namespace vramscope::torchlib {
namespace alloc = c10::cuda::CUDACachingAllocator;

namespace {

/// Allocates like torch's default CPU allocator (c10::alloc_cpu: 64-byte aligned) and traces
/// every allocation and free.
class TracingCpuAllocator final : public c10::Allocator {
 public:
  explicit TracingCpuAllocator(alloc::AllocatorTraceTracker tracker)
      : m_tracker(std::move(tracker)) {}

  c10::DataPtr allocate(std::size_t bytes) override {
    auto* header = static_cast<Header*>(c10::alloc_cpu(sizeof(Header) + bytes));
    header->bytes = bytes;
    header->owner = bytes >= traced_min_bytes ? this : nullptr;
    void* data = header + 1;
    if (header->owner != nullptr) trace(alloc::TraceEntry::ALLOC, data, bytes);
    return {data, header, &release, c10::Device(c10::DeviceType::CPU)};
  }
  // The context (the header) is not the data pointer, so there is no raw deleter.
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  /// Smaller allocations are not traced: they are the 0-dim tensors a Python number becomes
  /// (8 bytes) and its cast to the tensor's dtype (4), which in a GPU step are host tensors
  /// the caching allocator never sees. So an op of the small-ops loop traces one allocation, its
  /// output, on CPU as on the GPU.
  static constexpr std::size_t traced_min_bytes = 64;

  /// Before each allocation: its size for the free, and the allocator that traces the free
  /// (DataPtr's deleter is a plain function), or nullptr when it is not traced. 64 bytes keep
  /// the data 64-byte aligned.
  struct alignas(64) Header {
    std::size_t bytes;
    const TracingCpuAllocator* owner;
  };

  static void release(void* context) {
    auto* header = static_cast<Header*>(context);
    void* data = header + 1;
    if (header->owner != nullptr) {
      header->owner->trace(alloc::TraceEntry::FREE_REQUESTED, data, header->bytes);
      header->owner->trace(alloc::TraceEntry::FREE_COMPLETED, data, header->bytes);
    }
    c10::free_cpu(header);
  }

  void trace(alloc::TraceEntry::Action action, const void* data, std::size_t bytes) const {
    // The stream is a cudaStream_t up to 2.10 and a void* since: nullptr is both. The mempool
    // is spelled {0, 0} (MempoolId_t is c10::cuda's up to 2.8, c10's after).
    m_tracker(alloc::TraceEntry(action, 0, reinterpret_cast<std::uintptr_t>(data), bytes, nullptr,
                                {0, 0}, c10::getApproximateTime()));
  }

  alloc::AllocatorTraceTracker m_tracker;
};

}  // namespace

// Declared in torch_library.cpp's table.
bool attach_cpu_proxy(const tracking::TrackerTarget* target, VramscopeCurrentOp current_op,
                      VramscopeTorchError* error) {
  try {
    // Never freed: tensors it allocated may be freed until the process ends, and torch keeps
    // the pointer. Priority 1 outranks the default CPU allocator (registered at 0).
    auto* allocator = new TracingCpuAllocator(make_trace_tracker(*target, current_op));
    c10::SetCPUAllocator(allocator, 1);
    return true;
  } catch (const std::exception& e) {
    set_error(error, e.what());
    return false;
  }
}

}  // namespace vramscope::torchlib
