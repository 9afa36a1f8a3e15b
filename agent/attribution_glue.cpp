// agent/attribution_glue.cpp -- RecordFunction op stack, profiles, ledgers' lifetime, phases
//
// Op tracking: one global RecordFunction callback per sampling probability, added on the first
// profile() and then only disabled/re-enabled (removeCallback is unsafe while other threads run
// ops). Its start pushes the op onto a thread-local stack (interning the name lock-free after
// the first sight per thread); the allocator tracker reads the innermost op of its thread.
// The ledgers' tables are read in attribution_tables.cpp, the OOM capture is oom_capture.cpp's.
#include "attribution_glue.hpp"

#include <ATen/record_function.h>
#include <nanobind/stl/string.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "attribution/attributor.hpp"
#include "attribution/op_registry.hpp"
#include "attribution_state.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace glue {
attribution::OpRegistry* g_registry = new attribution::OpRegistry();
attribution::Attributor* g_attributor = nullptr;
std::vector<uint64_t> g_calls_at_start;
}  // namespace glue

namespace {
using attribution::PeakMark;
using glue::g_attributor;
using glue::g_calls_at_start;
using glue::g_registry;

tracking::AgentCore* g_core = nullptr;

std::mutex g_ops_mutex;
/// Callback handle per sampling probability, and which one is enabled (0: none).
std::map<double, at::CallbackHandle> g_callbacks;
at::CallbackHandle g_enabled_callback = 0;
int g_op_holds = 0;

/// Holds on "put the category breakdown into step records" (Monitor(model=...)), counted.
std::atomic<int> g_step_category_holds{0};

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  const uint32_t id = g_registry->intern(fn.name());
  g_registry->count_call(id);
  attribution::push_op(&fn, id);
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  attribution::pop_op(&fn);
}

/// Drops one hold on the ledgers; the last one stops the event stream.
void release_ledgers(tracking::AgentCore& core) {
  core.flush([&] {
    if (g_attributor->release() && !g_attributor->active()) core.set_streaming(false);
  });
}

/// Starts (or joins) the ledgers with the bytes live now as "(before)".
void acquire_ledgers(tracking::AgentCore& core) {
  core.flush([&] {
    // Events reach the ring (and the ledgers) only while streaming; outside attribution they go
    // to the counters and the recorder alone, which keeps the callback off other cores' caches.
    // Flipped under the core's lock, like release_ledgers(): the two cannot interleave.
    core.set_streaming(true);
    std::vector<uint64_t> live;
    for (std::size_t d = 0; d < core.device_count(); ++d) {
      live.push_back(core.counters(d).requested_bytes());
    }
    g_attributor->acquire(live);
  });
}

}  // namespace

void attribution_attach(tracking::AgentCore& core) {
  g_core = &core;
  g_attributor = new attribution::Attributor(core.device_count());
  core.set_event_consumer([](std::size_t device, const std::vector<tracking::Event>& events) {
    g_attributor->consume(device, events);
  });
  // Runs inside AgentCore::step() with the core's lock held and the device's events drained:
  // the breakdown at the step's peak and the restart of that peak happen at the same instant
  // as the step's other peaks.
  core.set_step_annotator([](std::size_t device) -> std::optional<CategoryBytes> {
    if (g_step_category_holds.load(std::memory_order_acquire) == 0 || !g_attributor->active()) {
      return std::nullopt;
    }
    std::optional<CategoryBytes> out;
    g_attributor->with_ledger(device, [&](attribution::Ledger& l) {
      out = attribution::category_bytes_at_peak(l.categories(PeakMark::Step));
      l.restart_peak(PeakMark::Step);
    });
    return out;
  });
}

void bind_attribution(nb::module_& m, tracking::AgentCore& (*core_of)()) {
  m.def(
      "profile_start",
      [core_of](double sampling) {
        if (!(sampling > 0.0) || sampling > 1.0) {
          throw nb::value_error("sampling must be in (0, 1]");
        }
        tracking::AgentCore& core = core_of();
        std::lock_guard lock(g_ops_mutex);
        if (g_op_holds > 0) throw std::runtime_error("a vramscope.profile() is already running");
        auto found = g_callbacks.find(sampling);
        if (found == g_callbacks.end()) {
          const at::CallbackHandle handle = at::addGlobalCallback(
              at::RecordFunctionCallback(&on_op_start, &on_op_end)
                  .samplingProb(sampling)
                  .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                           at::RecordScope::USER_SCOPE}));
          found = g_callbacks.emplace(sampling, handle).first;
        } else {
          at::reenableCallback(found->second);
        }
        g_enabled_callback = found->second;
        attribution::event_context.op_tracking.store(true, std::memory_order_relaxed);
        g_op_holds = 1;
        g_calls_at_start = g_registry->call_counts();
        acquire_ledgers(core);
        core.flush([] {
          for (std::size_t d = 0; d < g_attributor->device_count(); ++d) {
            g_attributor->with_ledger(d, [](attribution::Ledger& l) {
              l.restart_peak(PeakMark::Profile);
            });
          }
        });
        core.restart_profile_peaks();
      },
      "sampling"_a = 1.0, "Start per-op attribution (one profile at a time).");
  m.def(
      "profile_stop",
      [core_of] {
        tracking::AgentCore& core = core_of();
        std::lock_guard lock(g_ops_mutex);
        if (g_op_holds == 0) return;
        at::disableCallback(g_enabled_callback);
        attribution::event_context.op_tracking.store(false, std::memory_order_relaxed);
        g_op_holds = 0;
        release_ledgers(core);
      },
      "Stop per-op attribution; the tables stay readable.");
  m.def(
      "attribution_acquire", [core_of] { acquire_ledgers(core_of()); },
      "Start (or join) address attribution without op tracking (categories).");
  m.def(
      "attribution_release", [core_of] { release_ledgers(core_of()); },
      "Drop one hold taken by attribution_acquire().");
  m.def(
      "attribution_active", [] { return g_attributor != nullptr && g_attributor->active(); },
      "Is any profile() or category tracking running?");
  m.def(
      "step_categories",
      [](bool enable) {
        if (enable) {
          g_step_category_holds.fetch_add(1, std::memory_order_acq_rel);
          return;
        }
        int holds = g_step_category_holds.load(std::memory_order_acquire);
        while (holds > 0 &&
               !g_step_category_holds.compare_exchange_weak(holds, holds - 1,
                                                            std::memory_order_acq_rel)) {
        }
      },
      "enable"_a,
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
        attribution::set_phase(static_cast<uint8_t>(found->second));
      },
      "phase"_a, "Set the training phase that new allocations are categorised by.");
  m.def(
      "module_enter",
      [core_of](uint32_t module_id, bool backward) {
        // Drain first: the window edge must land after every event that happened before it.
        core_of().flush([&] {
          for (std::size_t d = 0; d < g_attributor->device_count(); ++d) {
            g_attributor->with_ledger(d, [&](attribution::Ledger& l) {
              if (backward) {
                l.backward_enter(module_id);
              } else {
                l.modules().forward_enter(module_id);
              }
            });
          }
        });
      },
      "module_id"_a, "backward"_a = false,
      "Open a forward frame (or backward window) of module_id on every device's ledger.");
  m.def(
      "module_exit",
      [core_of](uint32_t module_id, bool backward, bool measured) {
        core_of().flush([&] {
          for (std::size_t d = 0; d < g_attributor->device_count(); ++d) {
            g_attributor->with_ledger(d, [&](attribution::Ledger& l) {
              if (backward) {
                l.modules().backward_exit(module_id, measured);
              } else {
                l.modules().forward_exit(module_id);
              }
            });
          }
        });
      },
      "module_id"_a, "backward"_a = false, "measured"_a = true,
      "Close the innermost forward frame (or backward window) of module_id on every device.");
}

}  // namespace vramscope::agent
