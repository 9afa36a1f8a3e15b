// agent/oom_capture.hpp -- the allocator's segments at an OOM, and the Python post-mortem hook
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <vector>

#include "attribution/segment_view.hpp"

namespace vramscope::agent {

/// Called by the OOM observer after the core recorded the OOM: captures the allocator's segments
/// (snapshot without traces) and runs the Python post-mortem callback, if one is set, with the
/// GIL. Never throws.
void attribution_on_oom(std::size_t device) noexcept;

/// The allocator's segments now (c10 snapshot without traces), at most `max_blocks` blocks.
std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks);

/// Defines segments() and set_oom_callback() of vramscope._agent (docs/agent-api.md).
void bind_oom_capture(nanobind::module_& m);

}  // namespace vramscope::agent
