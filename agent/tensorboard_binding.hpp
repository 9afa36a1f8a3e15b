// agent/tensorboard_binding.hpp -- vramscope._agent.TensorBoardWriter: the native event-file writer
#pragma once

#include <nanobind/nanobind.h>

namespace vramscope::agent {

/// Defines `TensorBoardWriter` in `m`: the C++ writer of src/exporters/tensorboard.cpp with the
/// subset of torch's SummaryWriter API that vramscope.tensorboard uses (docs/agent-api.md).
void bind_tensorboard(nanobind::module_& m);

}  // namespace vramscope::agent
