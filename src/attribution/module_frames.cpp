// src/attribution/module_frames.cpp -- forward frames rolled up at the outermost return; windows
#include "vramscope/attribution/module_frames.hpp"

#include <algorithm>

namespace vramscope::attribution {
namespace {

/// Module ids above this are not ones the hooks hand out (they number paths from 1): such
/// calls are ignored rather than grow the row table without bound.
constexpr uint32_t max_module_id = 1U << 20U;

uint64_t positive(int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }

}  // namespace

ModuleTotals& ModuleFrames::row(uint32_t module_id) {
  if (module_id >= m_rows.size()) {
    const std::size_t old = m_rows.size();
    m_rows.resize(std::max<std::size_t>(module_id + 1, old * 2));
    for (std::size_t i = old; i < m_rows.size(); ++i)
      m_rows[i].module_id = static_cast<uint32_t>(i);
  }
  return m_rows[module_id];
}

void ModuleFrames::forward_enter(uint32_t module_id) {
  if (module_id >= max_module_id || m_ignored_forward_depth > 0 ||
      (m_stack.empty() && !m_windows.empty())) {
    ++m_ignored_forward_depth;
    return;
  }
  if (m_stack.empty()) {
    // A new outermost forward: ids of the previous one's frames can never match again.
    m_first_frame += m_frames.size();
    m_frames.clear();
  }
  const int32_t parent = m_stack.empty() ? -1 : m_stack.back();
  m_frames.push_back(Frame{module_id, parent, 0});
  m_stack.push_back(static_cast<int32_t>(m_frames.size() - 1));
}

bool ModuleFrames::forward_exit(uint32_t module_id) {
  if (m_ignored_forward_depth > 0) {
    --m_ignored_forward_depth;
    return true;
  }
  for (std::size_t i = m_stack.size(); i-- > 0;) {
    if (m_frames[static_cast<std::size_t>(m_stack[i])].module_id != module_id) continue;
    // Frames above it never saw their exit (an exception skipped the hook): they end here too.
    m_stack.resize(i);
    if (m_stack.empty()) finish_forward();
    return true;
  }
  return false;
}

void ModuleFrames::finish_forward() {
  // Children come after their parent in m_frames (pre-order), so one backward pass rolls every
  // frame's total into its parent before the parent is read.
  std::vector<int64_t> total(m_frames.size());
  for (std::size_t i = m_frames.size(); i-- > 0;) {
    total[i] += m_frames[i].live_bytes;
    if (m_frames[i].parent >= 0) total[static_cast<std::size_t>(m_frames[i].parent)] += total[i];
  }
  for (std::size_t i = 0; i < m_frames.size(); ++i) {
    ModuleTotals& r = row(m_frames[i].module_id);
    const uint64_t retained = positive(total[i]);
    ++r.forward_calls;
    r.retained_bytes += retained;
    r.max_retained_bytes = std::max(r.max_retained_bytes, retained);
  }
  // Keep m_frames: their allocations may be freed later and must still map to "finished".
  // The next outermost forward moves m_first_frame past them.
}

uint64_t ModuleFrames::current_frame() const {
  if (m_stack.empty()) return no_frame;
  return m_first_frame + static_cast<uint64_t>(m_stack.back());
}

uint32_t ModuleFrames::current_module() const {
  if (m_stack.empty()) return 0;
  return m_frames[static_cast<std::size_t>(m_stack.back())].module_id;
}

void ModuleFrames::add_live(uint32_t module_id, uint64_t size_bytes, bool alloc) {
  // forward_enter never opens a frame of an id >= max_module_id, so row() stays bounded.
  if (module_id >= max_module_id) return;
  ModuleTotals& r = row(module_id);
  if (alloc) {
    r.live_bytes += size_bytes;
  } else {
    r.live_bytes -= std::min(r.live_bytes, size_bytes);
  }
}

int64_t ModuleFrames::index_of(uint64_t frame) const {
  // Only frames of a forward still running are charged: once the outermost returned, its
  // retention is final.
  if (frame == no_frame || m_stack.empty() || frame < m_first_frame) return -1;
  const uint64_t index = frame - m_first_frame;
  return index < m_frames.size() ? static_cast<int64_t>(index) : -1;
}

void ModuleFrames::on_alloc(uint64_t frame, int64_t size_bytes) {
  const int64_t i = index_of(frame);
  if (i >= 0) m_frames[static_cast<std::size_t>(i)].live_bytes += size_bytes;
}

void ModuleFrames::on_free(uint64_t frame, int64_t size_bytes) {
  const int64_t i = index_of(frame);
  if (i >= 0) m_frames[static_cast<std::size_t>(i)].live_bytes -= size_bytes;
}

void ModuleFrames::backward_enter(uint32_t module_id, int64_t live_bytes) {
  m_windows.push_back(Window{module_id, live_bytes, live_bytes});
}

ModuleFrames::Window ModuleFrames::pop_window() {
  const Window top = m_windows.back();
  m_windows.pop_back();
  if (!m_windows.empty()) {
    m_windows.back().peak_bytes = std::max(m_windows.back().peak_bytes, top.peak_bytes);
  }
  return top;
}

bool ModuleFrames::backward_exit(uint32_t module_id, bool measured) {
  std::size_t i = m_windows.size();
  while (i > 0 && m_windows[i - 1].module_id != module_id) --i;
  if (i == 0) return false;
  // Windows above it whose exit never came end unmeasured; their peaks still count for it.
  while (m_windows.size() > i) pop_window();
  const Window window = pop_window();
  if (measured && module_id < max_module_id) {
    ModuleTotals& r = row(module_id);
    ++r.backward_calls;
    r.backward_peak_bytes =
        std::max(r.backward_peak_bytes, positive(window.peak_bytes - window.start_bytes));
  }
  return true;
}

std::vector<ModuleTotals> ModuleFrames::rows() const {
  std::vector<ModuleTotals> out;
  for (const ModuleTotals& r : m_rows) {
    if (r.forward_calls > 0 || r.backward_calls > 0 || r.live_bytes > 0) out.push_back(r);
  }
  return out;
}

}  // namespace vramscope::attribution
