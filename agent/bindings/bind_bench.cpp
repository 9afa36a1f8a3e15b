// agent/bindings/bind_bench.cpp -- benchmark builds only: the _bench_* functions of bench/agent_workers.py
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>

#include "bindings.hpp"
#include "torch_hooks.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {

#if VRAMSCOPE_BENCH_HOOKS
namespace {

/// Skips (true) or resumes (false) the tracker callback's work; torch still builds its
/// TraceEntry, so a benchmark can compare vramscope's share in one process.
void pause_tracking(bool paused) {
  Attachment& state = attached();
  if (state.mode != TrackingMode::Events) {
    throw std::runtime_error("the agent is not tracking events (mode: " + state.mode_text() + ")");
  }
  // The flag the tracker reads is the torch-facing library's (its copy of bench_gate.hpp).
  pause_torch_tracker(paused);
}

}  // namespace

void bind_bench(nb::module_& m) {
  m.def("_bench_attach_noop_tracker", &attach_noop_trace_tracker,
        "Benchmark support: attach a trace tracker that does nothing (cannot be undone).");
  m.def("_bench_alloc_pairs", &time_alloc_pairs, "pairs"_a, "size_bytes"_a,
        nb::call_guard<nb::gil_scoped_release>(),
        "Benchmark support: ns per raw_alloc+raw_delete pair, timed in C++ on the current device.");
  m.def("_bench_pause_tracking", &pause_tracking, "paused"_a,
        "Benchmark support: skip (True) or resume (False) the tracker callback's work. While "
        "paused no event is counted: the agent's numbers stop being exact for good.");
}
#else
void bind_bench(nb::module_& /*m*/) {}
#endif

}  // namespace vramscope::agent
