// agent/bindings/bind_attribution.cpp -- profiles, ledger holds, phases and module windows from Python
//
// The policy (one profile at a time, counted holds, streaming on and off) is
// attribution::AttributionSession's, torch-free and tested in C++; torch's RecordFunction is
// behind RecordFunctionSwitch (torch_bridge.cpp, over agent/torchlib/torch_library.cpp), whose
// callbacks intern op names into the session's registry. The ledgers' tables are read in
// bind_attribution_tables.cpp.
#include <nanobind/stl/string.h>

#include <map>
#include <string>

#include "bindings.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {

attribution::AttributionSession& session() { return *attached().attribution; }

/// Runs `fn` on every device's ledger, after draining every event before this call.
template <typename Fn>
void for_each_ledger(Fn&& fn) {
  attribution::AttributionSession& s = session();
  s.core().flush([&] {
    for (std::size_t d = 0; d < s.attributor().device_count(); ++d)
      s.attributor().with_ledger(d, fn);
  });
}

}  // namespace

void bind_attribution(nb::module_& m) {
  m.def(
      "profile_start", [](double sampling) { session().start_profile(sampling); },
      "sampling"_a = 1.0, "Start per-op attribution (one profile at a time).");
  m.def(
      "profile_stop", [] { session().stop_profile(); },
      "Stop per-op attribution; the tables stay readable.");
  m.def(
      "attribution_acquire", [] { session().acquire(); },
      "Start (or join) address attribution without op tracking (categories).");
  m.def(
      "attribution_release", [] { session().release(); },
      "Drop one hold taken by attribution_acquire().");
  m.def(
      "attribution_active",
      [] {
        Attachment* attachment = attached_or_null();
        return attachment != nullptr && attachment->attribution->active();
      },
      "Is any profile() or category tracking running?");
  m.def(
      "step_categories", [](bool enable) { session().hold_step_categories(enable); }, "enable"_a,
      "Take (True) or drop (False) a hold on per-category bytes in step records: while any is "
      "held and attribution is active, step() puts each device's breakdown at the step's peak "
      "into its record and restarts the ledger's step peak.");
  m.def(
      "set_phase",
      [](const std::string& phase) {
        static const std::map<std::string, attribution::Phase> phases = {
            {"other", attribution::Phase::Other},
            {"forward", attribution::Phase::Forward},
            {"backward", attribution::Phase::Backward},
            {"optimizer", attribution::Phase::Optimizer}};
        const auto found = phases.find(phase);
        if (found == phases.end()) throw nb::value_error("phase: other|forward|backward|optimizer");
        attached().core->set_phase(static_cast<uint8_t>(found->second));
      },
      "phase"_a, "Set the training phase that new allocations are categorised by.");
  m.def(
      "module_enter",
      [](uint32_t module_id, bool backward) {
        // Drain first (with_ledger does): the window edge must land after every event that
        // happened before it.
        for_each_ledger([&](attribution::Ledger& l) {
          if (backward) {
            l.backward_enter(module_id);
          } else {
            l.modules().forward_enter(module_id);
          }
        });
      },
      "module_id"_a, "backward"_a = false,
      "Open a forward frame (or backward window) of module_id on every device's ledger.");
  m.def(
      "module_exit",
      [](uint32_t module_id, bool backward, bool measured) {
        for_each_ledger([&](attribution::Ledger& l) {
          if (backward) {
            l.modules().backward_exit(module_id, measured);
          } else {
            l.modules().forward_exit(module_id);
          }
        });
      },
      "module_id"_a, "backward"_a = false, "measured"_a = true,
      "Close the innermost forward frame (or backward window) of module_id on every device.");
}

}  // namespace vramscope::agent
