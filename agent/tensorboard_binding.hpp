// agent/tensorboard_binding.hpp -- vramscope._agent.TensorBoardWriter: the native event-file writer
#pragma once

#include <nanobind/nanobind.h>

namespace vramscope::agent {

/// Defines `TensorBoardWriter` in `m`: the C++ writer of src/exporters/tensorboard.cpp with the
/// subset of torch's SummaryWriter API that vramscope.tensorboard uses (docs/agent-api.md), and
/// `tensorboard_step_scalars`, the tags of a Monitor step from the exporter's tables.
void bind_tensorboard(nanobind::module_& m);

}  // namespace vramscope::agent
