// agent/bindings/bindings.hpp -- the binding layer of vramscope._agent: the only code that reaches AgentState::instance()
//
// The parts under agent/ (the owner AgentState, the OOM capture, the driver probe, the torch
// hooks, the record converters) take what they need as arguments and never include this
// folder; each bind_<area>.cpp here defines one area's functions of the module (the API is
// docs/agent-api.md), and agent_module.cpp's NB_MODULE calls them in turn.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>

#include "agent_state.hpp"

namespace vramscope::agent {

/// AgentState::instance().attached(): throws std::runtime_error before attach().
Attachment& attached();
/// The attachment, or nullptr before attach().
Attachment* attached_or_null() noexcept;
/// `device` checked against the tracked devices (IndexError when out of range).
std::size_t checked_device(const Attachment& state, int device);

/// attach(), is_attached(), mode(), device_count(), segment_path(), allocator_backend().
void bind_attach(nanobind::module_& m);
/// The memory readers: memory_*(), max_memory_*(), reset_peak(), stats(), empty_cache().
void bind_memory(nanobind::module_& m);
/// Steps, rank and OOMs: step(), set_rank(), last_oom(), note_oom(), recent_events().
void bind_steps(nanobind::module_& m);
/// Profiles, ledger holds, phases and module windows over the attached AttributionSession.
void bind_attribution(nanobind::module_& m);
/// The ledger readers (op_table, module_table, live_by_owner, categories, tag, ...).
void bind_attribution_tables(nanobind::module_& m);
/// segments(), oom_snapshot() and set_oom_callback().
void bind_oom(nanobind::module_& m);
/// driver_process_bytes(uuid, pid) and driver_probe_error().
void bind_driver(nanobind::module_& m);
/// polling_segment_open/publish/set_rank/close(): the segment of a process that polls.
void bind_polling(nanobind::module_& m);
/// The TensorBoardWriter class: the C++ writer of src/exporters/tensorboard.cpp with the subset
/// of torch's SummaryWriter API that vramscope.tensorboard uses.
void bind_tensorboard(nanobind::module_& m);
/// load_torch(), torch_version() and _bench_attach_cpu_proxy() (every build: the tests count
/// the CPU proxy's events under each torch).
void bind_torch(nanobind::module_& m);
/// Benchmark builds only (VRAMSCOPE_BENCH_HOOKS): the _bench_* functions; nothing otherwise.
void bind_bench(nanobind::module_& m);

}  // namespace vramscope::agent
