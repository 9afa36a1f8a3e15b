// agent/cpu_proxy.cpp -- benchmark builds only: torch's CPU tensors drive the trace tracker, so that a launch-bound step's share can be timed without a GPU
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
// is per event of a CPU step, and a GPU run decides.
//
// Written for torch 2.11's TraceEntry (its constructor takes a mempool since 2.4); benchmark
// builds are made against the torch they measure.
#if VRAMSCOPE_BENCH_HOOKS

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/ApproximateClock.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "torch_hooks.hpp"
#include "trace_tracker.hpp"

namespace vramscope::agent {
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
    m_tracker(alloc::TraceEntry(action, 0, reinterpret_cast<std::uintptr_t>(data), bytes, nullptr,
                                c10::MempoolId_t{0, 0}, c10::getApproximateTime()));
  }

  alloc::AllocatorTraceTracker m_tracker;
};

}  // namespace

void attach_cpu_proxy_tracker(tracking::TrackerTarget target) {
  // Never freed: tensors it allocated may be freed until the process ends, and torch keeps the
  // pointer. Priority 1 outranks the default CPU allocator (registered at 0).
  auto* allocator = new TracingCpuAllocator(make_trace_tracker(target));
  c10::SetCPUAllocator(allocator, 1);
}

}  // namespace vramscope::agent

#endif  // VRAMSCOPE_BENCH_HOOKS
