// src/attribution/ledger.cpp -- address matching, live-at-peak stamps and category retagging
#include "vramscope/attribution/ledger.hpp"

#include <algorithm>

namespace vramscope::attribution {
namespace {

/// Op ids above this are not interned names (a corrupt event): charge them to no_op_id rather
/// than grow the table without bound.
constexpr uint32_t max_op_id = 1U << 20U;

int64_t signed_size(uint64_t size_bytes) {
  return size_bytes > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                       : static_cast<int64_t>(size_bytes);
}

}  // namespace

std::string_view category_name(Category category) {
  const auto index = static_cast<std::size_t>(category);
  return index < category_count ? memory_category_names[index] : "other";
}

CategoryBytes category_bytes_at_peak(const std::array<CategoryTotals, category_count>& totals) {
  CategoryBytes out{};
  for (const CategoryTotals& c : totals) {
    out[static_cast<std::size_t>(c.category)] += c.live_at_peak_bytes;
  }
  return out;
}

Category category_of_phase(Phase phase) {
  switch (phase) {
    case Phase::Forward:
      return Category::Activations;
    case Phase::Backward:
    case Phase::Optimizer:
      return Category::Temporaries;
    case Phase::Other:
      break;
  }
  return Category::Other;
}

Ledger::Ledger(uint64_t live_before_bytes) {
  const int64_t before = signed_size(live_before_bytes);
  op(before_op_id).bytes.live = before;
  m_categories[static_cast<std::size_t>(Category::Other)].live = before;
  m_live_bytes = before;
  for (Peak& peak : m_peaks) peak.bytes = before;
}

void Ledger::touch(Accumulator& acc) const {
  for (std::size_t m = 0; m < ledger_mark_count; ++m) {
    if (acc.stamp[m] != m_peaks[m].generation) {
      acc.at_peak[m] = acc.live;
      acc.stamp[m] = m_peaks[m].generation;
    }
  }
}

int64_t Ledger::at_peak(const Accumulator& acc, PeakMark mark) const {
  const std::size_t m = index(mark);
  return acc.stamp[m] == m_peaks[m].generation ? acc.at_peak[m] : acc.live;
}

Ledger::OpAccumulator& Ledger::op(uint32_t op_id) {
  if (op_id >= max_op_id) op_id = no_op_id;
  if (op_id >= m_ops.size()) m_ops.resize(std::max<std::size_t>(op_id + 1, m_ops.size() * 2));
  return m_ops[op_id];
}

void Ledger::add_live(uint32_t op_id, Category category, int64_t delta) {
  Accumulator& by_op = op(op_id).bytes;
  Accumulator& by_category = m_categories[static_cast<std::size_t>(category)];
  touch(by_op);
  touch(by_category);
  by_op.live += delta;
  by_category.live += delta;
  m_live_bytes += delta;
  if (delta <= 0) return;
  m_modules.on_live(m_live_bytes);
  for (Peak& peak : m_peaks) {
    if (m_live_bytes > peak.bytes) {
      // Every accumulator is now stale for this mark: its value at the new peak is its live
      // value until it changes again.
      peak.bytes = m_live_bytes;
      ++peak.generation;
      peak.sequence = m_sequence;
    }
  }
}

void Ledger::on_event(const tracking::Event& event) {
  switch (event.action) {
    case tracking::Action::Alloc: {
      if (m_allocations.count(event.address) != 0) {
        // Its free never reached us (a dropped event): the block is evidently free again.
        free_completed(event.address, 0);
      }
      const uint32_t op_id = event.op_id < max_op_id ? event.op_id : no_op_id;
      const Category category = category_of_phase(static_cast<Phase>(event.phase));
      const uint64_t frame = m_modules.current_frame();
      const uint32_t module_id = frame == no_frame ? 0 : m_modules.current_module();
      m_allocations[event.address] =
          Allocation{event.size_bytes, ++m_sequence, frame, op_id, module_id, category};
      m_modules.on_alloc(frame, signed_size(event.size_bytes));
      if (frame != no_frame) m_modules.add_live(module_id, event.size_bytes, true);
      OpAccumulator& acc = op(op_id);
      ++acc.alloc_count;
      acc.allocated_bytes += event.size_bytes;
      add_live(op_id, category, signed_size(event.size_bytes));
      break;
    }
    case tracking::Action::FreeRequested:
      op(event.op_id).self_freed_bytes += event.size_bytes;
      break;
    case tracking::Action::FreeCompleted:
      free_completed(event.address, event.size_bytes);
      break;
    default:
      break;
  }
}

void Ledger::free_completed(uint64_t address, uint64_t size_bytes) {
  const auto found = m_allocations.find(address);
  if (found != m_allocations.end()) {
    const Allocation allocation = found->second;
    m_allocations.erase(found);
    m_modules.on_free(allocation.frame, signed_size(allocation.size_bytes));
    if (allocation.frame != no_frame) {
      m_modules.add_live(allocation.module_id, allocation.size_bytes, false);
    }
    add_live(allocation.op_id, allocation.category, -signed_size(allocation.size_bytes));
    return;
  }
  // Allocated before the ledger started: it was part of the "before" bytes. Never take more
  // than those, so that ops and categories keep summing to the total.
  ++m_untracked_frees;
  const int64_t before = op(before_op_id).bytes.live;
  const int64_t other = m_categories[static_cast<std::size_t>(Category::Other)].live;
  const int64_t taken = std::min({signed_size(size_bytes), before, other});
  if (taken > 0) add_live(before_op_id, Category::Other, -taken);
}

bool Ledger::tag(uint64_t address, uint64_t size_bytes, Category category) {
  auto found = m_allocations.find(address);
  if (found == m_allocations.end()) {
    if (size_bytes == 0) return false;
    // Sequence 0: live before any peak this ledger knows, so live at all of them.
    found =
        m_allocations
            .emplace(address, Allocation{size_bytes, 0, no_frame, before_op_id, 0, Category::Other})
            .first;
  }
  Allocation& allocation = found->second;
  if (allocation.category == category) return true;
  Accumulator& from = m_categories[static_cast<std::size_t>(allocation.category)];
  Accumulator& to = m_categories[static_cast<std::size_t>(category)];
  touch(from);
  touch(to);
  const int64_t size = signed_size(allocation.size_bytes);
  from.live -= size;
  to.live += size;
  for (std::size_t m = 0; m < ledger_mark_count; ++m) {
    // Live now and allocated no later than the peak: it was live at the peak, so the peak's
    // breakdown moves too (a gradient tagged at step end counts as a gradient at the peak).
    if (allocation.sequence <= m_peaks[m].sequence) {
      from.at_peak[m] -= size;
      to.at_peak[m] += size;
    }
  }
  allocation.category = category;
  return true;
}

void Ledger::restart_peak(PeakMark mark) {
  Peak& peak = m_peaks[index(mark)];
  peak.bytes = m_live_bytes;
  ++peak.generation;
  peak.sequence = m_sequence;
}

std::vector<OpTotals> Ledger::ops(PeakMark mark) const {
  std::vector<OpTotals> rows;
  for (std::size_t id = 0; id < m_ops.size(); ++id) {
    const OpAccumulator& acc = m_ops[id];
    const int64_t peak_live = at_peak(acc.bytes, mark);
    if (acc.alloc_count == 0 && acc.self_freed_bytes == 0 && acc.bytes.live == 0 &&
        peak_live == 0) {
      continue;
    }
    rows.push_back(OpTotals{static_cast<uint32_t>(id), acc.alloc_count, acc.allocated_bytes,
                            acc.self_freed_bytes, clamp(acc.bytes.live), clamp(peak_live)});
  }
  return rows;
}

std::array<CategoryTotals, category_count> Ledger::categories(PeakMark mark) const {
  std::array<CategoryTotals, category_count> out{};
  for (std::size_t c = 0; c < category_count; ++c) {
    out[c] = CategoryTotals{static_cast<Category>(c), clamp(m_categories[c].live),
                            clamp(at_peak(m_categories[c], mark))};
  }
  return out;
}

}  // namespace vramscope::attribution
