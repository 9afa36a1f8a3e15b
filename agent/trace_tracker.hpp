// agent/trace_tracker.hpp -- the trace tracker torch calls for every allocator event, for the files that hand it to an allocator
//
// torch_hooks.hpp keeps c10 types out of the bindings; this header is for the two places that
// give the tracker to an allocator: torch's caching allocator (torch_hooks.cpp) and, in
// benchmark builds, the CPU proxy's (cpu_proxy.cpp).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>

#include "vramscope/tracking/device_producer.hpp"

namespace vramscope::agent {

/// The tracker that applies each event to its device's producer in `target`. Its closure is
/// `target` itself (two words, inside std::function's inline storage), and its invoker inlines
/// the producer's work (see vramscope/tracking/device_producer.hpp).
c10::cuda::CUDACachingAllocator::AllocatorTraceTracker make_trace_tracker(
    tracking::TrackerTarget target);

}  // namespace vramscope::agent
