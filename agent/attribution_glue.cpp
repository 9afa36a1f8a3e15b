// agent/attribution_glue.cpp -- RecordFunction op stack, ledgers, tags, phases and the OOM hook
//
// Op tracking: one global RecordFunction callback per sampling probability, added on the first
// profile() and then only disabled/re-enabled (removeCallback is unsafe while other threads run
// ops). Its start pushes the op onto a thread-local stack (interning the name lock-free after
// the first sight per thread); the allocator tracker reads the innermost op of its thread.
#include "attribution_glue.hpp"

#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "attribution/attributor.hpp"
#include "attribution/op_registry.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {
namespace alloc = c10::cuda::CUDACachingAllocator;
using attribution::Category;
using attribution::PeakMark;

/// Like the core, leaked on purpose: callbacks may still run at interpreter exit.
attribution::OpRegistry* g_registry = new attribution::OpRegistry();
attribution::Attributor* g_attributor = nullptr;
tracking::AgentCore* g_core = nullptr;

std::mutex g_ops_mutex;
/// Callback handle per sampling probability, and which one is enabled (0: none).
std::map<double, at::CallbackHandle> g_callbacks;
at::CallbackHandle g_enabled_callback = 0;
int g_op_holds = 0;
std::vector<uint64_t> g_calls_at_start;

/// Holds on "put the category breakdown into step records" (Monitor(model=...)), counted.
std::atomic<int> g_step_category_holds{0};

/// Blocks captured by the last OOM observer call (host memory, bounded).
std::mutex g_oom_mutex;
std::vector<attribution::SegmentView> g_oom_segments;
nb::object* g_oom_callback = nullptr;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  const uint32_t id = g_registry->intern(fn.name());
  g_registry->count_call(id);
  attribution::push_op(&fn, id);
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  attribution::pop_op(&fn);
}

Category parse_category(const std::string& name) {
  for (std::size_t c = 0; c < attribution::category_count; ++c) {
    if (attribution::category_name(static_cast<Category>(c)) == name) {
      return static_cast<Category>(c);
    }
  }
  throw nb::value_error(("unknown category '" + name + "'").c_str());
}

PeakMark parse_mark(const std::string& name) {
  if (name == "profile") return PeakMark::Profile;
  if (name == "step") return PeakMark::Step;
  throw nb::value_error(("unknown peak mark '" + name + "' (profile or step)").c_str());
}

/// Starts (or joins) the ledgers with the bytes live now as "(before)".
void acquire_ledgers(tracking::AgentCore& core) {
  core.flush([&] {
    std::vector<uint64_t> live;
    for (std::size_t d = 0; d < core.device_count(); ++d) {
      live.push_back(core.counters(d).requested_bytes());
    }
    g_attributor->acquire(live);
  });
}

attribution::BlockState state_of(const alloc::BlockInfo& block) {
  if (block.allocated) return attribution::BlockState::ActiveAllocated;
  if (block.active) return attribution::BlockState::ActivePendingFree;
  return attribution::BlockState::Inactive;
}

nb::list segments_list(const std::vector<attribution::SegmentView>& segments) {
  nb::list out;
  for (const attribution::SegmentView& s : segments) {
    nb::list blocks;
    for (const attribution::BlockView& b : s.blocks) {
      blocks.append(nb::make_tuple(b.size_bytes, b.requested_bytes,
                                   std::string(attribution::block_state_name(b.state))));
    }
    nb::dict d;
    d["device"] = s.device;
    d["address"] = s.address;
    d["total_size"] = s.total_bytes;
    d["requested_size"] = s.requested_bytes;
    d["allocated_size"] = s.allocated_bytes;
    d["active_size"] = s.active_bytes;
    d["stream"] = s.stream;
    d["is_large"] = s.is_large;
    d["is_expandable"] = s.is_expandable;
    d["blocks"] = blocks;
    out.append(d);
  }
  return out;
}

}  // namespace

std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks) {
  std::vector<attribution::SegmentView> out;
  const auto info = alloc::snapshot(c10::MempoolId_t{0, 0}, false);
  std::size_t blocks = 0;
  out.reserve(info.segments.size());
  for (const auto& segment : info.segments) {
    attribution::SegmentView s;
    s.device = static_cast<int32_t>(segment.device);
    s.address = segment.address;
    s.total_bytes = segment.total_size;
    s.requested_bytes = segment.requested_size;
    s.allocated_bytes = segment.allocated_size;
    s.active_bytes = segment.active_size;
    s.stream = reinterpret_cast<uint64_t>(segment.stream);
    s.is_large = segment.is_large;
    s.is_expandable = segment.is_expandable;
    for (const auto& block : segment.blocks) {
      if (blocks++ >= max_blocks) break;
      s.blocks.push_back({block.size, block.requested_size, state_of(block)});
    }
    out.push_back(std::move(s));
  }
  return out;
}

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

void attribution_on_oom(std::size_t device) noexcept {
  try {
    // Bounded host memory: a million blocks is ~24 MB, far more than real caches hold.
    std::vector<attribution::SegmentView> segments = capture_segments(1'000'000);
    {
      std::lock_guard lock(g_oom_mutex);
      g_oom_segments = std::move(segments);
    }
    if (g_oom_callback == nullptr || !Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    try {
      (*g_oom_callback)(device);
    } catch (const nb::python_error& error) {
      // The post-mortem must never replace the OutOfMemoryError the program is about to see.
      PyErr_Clear();
      static_cast<void>(error);
    }
  } catch (...) {
  }
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
        attribution::op_tracking.store(true, std::memory_order_relaxed);
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
      },
      "sampling"_a = 1.0, "Start per-op attribution (one profile at a time).");
  m.def(
      "profile_stop",
      [core_of] {
        tracking::AgentCore& core = core_of();
        std::lock_guard lock(g_ops_mutex);
        if (g_op_holds == 0) return;
        at::disableCallback(g_enabled_callback);
        attribution::op_tracking.store(false, std::memory_order_relaxed);
        g_op_holds = 0;
        core.flush([] { g_attributor->release(); });
      },
      "Stop per-op attribution; the tables stay readable.");
  m.def(
      "attribution_acquire", [core_of] { acquire_ledgers(core_of()); },
      "Start (or join) address attribution without op tracking (categories).");
  m.def(
      "attribution_release", [core_of] { core_of().flush([] { g_attributor->release(); }); },
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
      "op_table",
      [core_of](int device, const std::string& mark) {
        tracking::AgentCore& core = core_of();
        const PeakMark peak_mark = parse_mark(mark);
        std::vector<attribution::OpTotals> rows;
        core.flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
            rows = l.ops(peak_mark);
          });
        });
        const std::vector<uint64_t> calls = g_registry->call_counts();
        nb::list out;
        for (const attribution::OpTotals& r : rows) {
          const uint64_t before = r.op_id < g_calls_at_start.size() ? g_calls_at_start[r.op_id] : 0;
          nb::dict d;
          d["name"] = g_registry->name(r.op_id);
          d["calls"] = r.op_id < calls.size() ? calls[r.op_id] - before : 0;
          d["alloc_count"] = r.alloc_count;
          d["allocated_bytes"] = r.allocated_bytes;
          d["self_freed_bytes"] = r.self_freed_bytes;
          d["live_bytes"] = r.live_bytes;
          d["live_at_peak_bytes"] = r.live_at_peak_bytes;
          out.append(d);
        }
        return out;
      },
      "device"_a, "mark"_a = "profile", "Per-op rows of one device ([] before any profile).");
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
  m.def(
      "module_table",
      [core_of](int device) {
        std::vector<attribution::ModuleTotals> rows;
        core_of().flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
            rows = l.modules().rows();
          });
        });
        nb::list out;
        for (const attribution::ModuleTotals& r : rows) {
          nb::dict d;
          d["module_id"] = r.module_id;
          d["forward_calls"] = r.forward_calls;
          d["retained_bytes"] = r.retained_bytes;
          d["max_retained_bytes"] = r.max_retained_bytes;
          d["backward_calls"] = r.backward_calls;
          d["backward_peak_bytes"] = r.backward_peak_bytes;
          d["live_bytes"] = r.live_bytes;
          out.append(d);
        }
        return out;
      },
      "device"_a, "Per-module rows of one device ([] before any profile).");
  m.def(
      "live_by_owner",
      [core_of](int device) {
        // What the OOM leak evidence keeps at every step end: only owners holding bytes, and no
        // per-row dicts -- op_table() and module_table() cost ~10x more per step on big models.
        std::vector<attribution::OpTotals> ops;
        std::vector<attribution::ModuleTotals> modules;
        core_of().flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
            ops = l.ops(PeakMark::Profile);
            modules = l.modules().rows();
          });
        });
        nb::dict by_op;
        for (const attribution::OpTotals& r : ops) {
          if (r.live_bytes > 0 && r.op_id != attribution::before_op_id) {
            by_op[nb::str(g_registry->name(r.op_id).c_str())] = r.live_bytes;
          }
        }
        nb::dict by_module;
        for (const attribution::ModuleTotals& r : modules) {
          if (r.live_bytes > 0) by_module[nb::int_(r.module_id)] = r.live_bytes;
        }
        return nb::make_tuple(by_op, by_module);
      },
      "device"_a,
      "({op name: live bytes}, {module id: live bytes}) of one device, owners holding bytes only.");
  m.def(
      "attribution_summary",
      [core_of](int device) {
        tracking::AgentCore& core = core_of();
        nb::dict d;
        core.flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
            d["live_bytes"] = l.live_bytes();
            d["peak_bytes"] = l.peak_bytes(PeakMark::Profile);
            d["step_peak_bytes"] = l.peak_bytes(PeakMark::Step);
            d["tracked_allocations"] = l.tracked_allocations();
            d["untracked_free_count"] = l.untracked_free_count();
          });
        });
        return d;
      },
      "device"_a, "Ledger totals of one device ({} before any attribution).");
  m.def(
      "categories",
      [core_of](int device, const std::string& mark) {
        tracking::AgentCore& core = core_of();
        const PeakMark peak_mark = parse_mark(mark);
        nb::dict d;
        core.flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
            for (const attribution::CategoryTotals& c : l.categories(peak_mark)) {
              d[std::string(attribution::category_name(c.category)).c_str()] =
                  nb::make_tuple(c.live_bytes, c.live_at_peak_bytes);
            }
          });
        });
        return d;
      },
      "device"_a, "mark"_a = "step",
      "{category: (live_bytes, live_at_peak_bytes)} of one device ({} without attribution).");
  m.def(
      "tag",
      [core_of](int device, const std::string& category,
                const std::vector<std::tuple<uint64_t, uint64_t>>& blocks) {
        tracking::AgentCore& core = core_of();
        const Category c = parse_category(category);
        std::size_t tagged = 0;
        core.flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
            for (const auto& [address, size] : blocks) tagged += l.tag(address, size, c) ? 1 : 0;
          });
        });
        return tagged;
      },
      "device"_a, "category"_a, "blocks"_a,
      "Tag live blocks [(data_ptr, nbytes)] with a category; returns how many were tagged.");
  m.def(
      "restart_attribution_peak",
      [core_of](int device, const std::string& mark) {
        const PeakMark peak_mark = parse_mark(mark);
        core_of().flush([&] {
          g_attributor->with_ledger(static_cast<std::size_t>(device),
                                    [&](attribution::Ledger& l) { l.restart_peak(peak_mark); });
        });
      },
      "device"_a, "mark"_a, "Restart the ledger's 'profile' or 'step' peak of one device.");
  m.def(
      "segments",
      [](bool at_oom) {
        if (at_oom) {
          std::lock_guard lock(g_oom_mutex);
          return segments_list(g_oom_segments);
        }
        std::vector<attribution::SegmentView> now;
        {
          nb::gil_scoped_release release;
          now = capture_segments(1'000'000);
        }
        return segments_list(now);
      },
      "at_oom"_a = false,
      "Allocator segments (snapshot without traces): now, or as captured at the last OOM.");
  m.def(
      "set_oom_callback",
      [](nb::object callback) {
        nb::object* previous = g_oom_callback;
        g_oom_callback = callback.is_none() ? nullptr : new nb::object(std::move(callback));
        // The previous callback object is leaked: the observer may be running it right now on
        // another thread, and an OOM handler is set once or twice per process.
        static_cast<void>(previous);
      },
      "callback"_a, "Call callback(device) with the GIL from the OOM observer (None: stop).");
}

}  // namespace vramscope::agent
