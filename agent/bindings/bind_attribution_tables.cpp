// agent/bindings/bind_attribution_tables.cpp -- the ledgers read from Python: per-op, per-module
// and per-category tables, the lean live-bytes snapshot of step ends, tags and peak restarts
//
// Every reader drains the rings first (core.flush), so a table includes every event that
// happened before the call.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <tuple>
#include <vector>

#include "bindings.hpp"
#include "py_records.hpp"
#include "vramscope/attribution/attributor.hpp"
#include "vramscope/attribution/op_registry.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace vramscope::agent {
namespace {
using attribution::Category;
using attribution::PeakMark;

attribution::AttributionSession& session() { return *attached().attribution; }

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

}  // namespace

void bind_attribution_tables(nb::module_& m) {
  m.def(
      "op_table",
      [](int device, const std::string& mark) {
        const PeakMark peak_mark = parse_mark(mark);
        attribution::AttributionSession& s = session();
        std::vector<attribution::OpTotals> rows;
        s.with_ledger(static_cast<std::size_t>(device),
                      [&](attribution::Ledger& l) { rows = l.ops(peak_mark); });
        return op_rows_list(rows, s.registry(), s.calls_since_profile_start());
      },
      "device"_a, "mark"_a = "profile", "Per-op rows of one device ([] before any profile).");
  m.def(
      "module_table",
      [](int device) {
        std::vector<attribution::ModuleTotals> rows;
        session().with_ledger(static_cast<std::size_t>(device),
                              [&](attribution::Ledger& l) { rows = l.modules().rows(); });
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
      [](int device) {
        // What the OOM leak evidence keeps at every step end: only owners holding bytes, and no
        // per-row dicts -- op_table() and module_table() cost ~10x more per step on big models.
        std::vector<attribution::OpTotals> ops;
        std::vector<attribution::ModuleTotals> modules;
        attribution::AttributionSession& s = session();
        s.with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
          ops = l.ops(PeakMark::Profile);
          modules = l.modules().rows();
        });
        nb::dict by_op;
        for (const attribution::OpTotals& r : ops) {
          if (r.live_bytes > 0 && r.op_id != attribution::before_op_id) {
            by_op[nb::str(s.registry().name(r.op_id).c_str())] = r.live_bytes;
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
      [](int device) {
        attribution::AttributionSession& s = session();
        nb::dict d;
        s.with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
          d["live_bytes"] = l.live_bytes();
          d["peak_bytes"] = l.peak_bytes(PeakMark::Profile);
          d["step_peak_bytes"] = l.peak_bytes(PeakMark::Step);
          d["tracked_allocations"] = l.tracked_allocations();
          d["untracked_free_count"] = l.untracked_free_count();
        });
        // torch's allocated bytes (blocks), exact from events like every vramscope peak; the
        // ledger's own peak above is of requested (live) bytes.
        if (d.size() > 0) {
          d["peak_allocated_bytes"] =
              s.core().profile_peaks(static_cast<std::size_t>(device)).allocated_bytes;
        }
        return d;
      },
      "device"_a, "Ledger totals of one device ({} before any attribution).");
  m.def(
      "categories",
      [](int device, const std::string& mark) {
        const PeakMark peak_mark = parse_mark(mark);
        nb::dict d;
        session().with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
          d = categories_dict(l.categories(peak_mark));
        });
        return d;
      },
      "device"_a, "mark"_a = "step",
      "{category: (live_bytes, live_at_peak_bytes)} of one device ({} without attribution).");
  m.def(
      "tag",
      [](int device, const std::string& category,
         const std::vector<std::tuple<uint64_t, uint64_t>>& blocks) {
        const Category c = parse_category(category);
        std::size_t tagged = 0;
        session().with_ledger(static_cast<std::size_t>(device), [&](attribution::Ledger& l) {
          for (const auto& [address, size] : blocks) tagged += l.tag(address, size, c) ? 1 : 0;
        });
        return tagged;
      },
      "device"_a, "category"_a, "blocks"_a,
      "Tag live blocks [(data_ptr, nbytes)] with a category; returns how many were tagged.");
  m.def(
      "restart_attribution_peak",
      [](int device, const std::string& mark) {
        const PeakMark peak_mark = parse_mark(mark);
        session().with_ledger(static_cast<std::size_t>(device),
                              [&](attribution::Ledger& l) { l.restart_peak(peak_mark); });
      },
      "device"_a, "mark"_a, "Restart the ledger's 'profile' or 'step' peak of one device.");
}

}  // namespace vramscope::agent
