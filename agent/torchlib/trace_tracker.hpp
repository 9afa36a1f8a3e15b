// agent/torchlib/trace_tracker.hpp -- the trace tracker torch calls for every allocator event, for the files that hand it to an allocator
//
// This header is for the two places that give the tracker to an allocator: torch's caching
// allocator (torch_library.cpp) and the CPU proxy's (cpu_proxy.cpp).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>

#include "torch_api.h"
#include "vramscope/tracking/device_producer.hpp"

namespace vramscope::torchlib {

/// The tracker that applies each event to its device's producer in `target`. Its closure is
/// `target` itself (two words, inside std::function's inline storage), and its invoker inlines
/// the producer's work (see vramscope/tracking/device_producer.hpp). While a profile tracks ops it
/// asks `current_op` (the extension's attribution::current_op) for the calling thread's op; the
/// last one given is kept for every tracker of the process (one extension per process).
c10::cuda::CUDACachingAllocator::AllocatorTraceTracker make_trace_tracker(
    tracking::TrackerTarget target, VramscopeCurrentOp current_op);

/// Makes torch's CPU tensors call the tracker as device 0's events (cpu_proxy.cpp).
bool attach_cpu_proxy(const tracking::TrackerTarget* target, VramscopeCurrentOp current_op,
                      VramscopeTorchError* error);

/// torch's first line of `message` into `error` (c10 errors append a C++ backtrace).
void set_error(VramscopeTorchError* error, const char* message) noexcept;

}  // namespace vramscope::torchlib
