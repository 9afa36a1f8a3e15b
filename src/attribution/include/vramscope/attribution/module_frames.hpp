// src/attribution/include/vramscope/attribution/module_frames.hpp -- per-module forward retention and backward peaks, by address
//
// The Python module hooks open and close module windows (through the agent, which first drains
// the event rings, so every window edge lands in event order). A Ledger owns one ModuleFrames
// and tells it about each allocation, free and new live total.
//
// Forward retention: each forward call is a frame (a module id and its parent frame). An
// allocation made while forward frames are open is charged to the innermost one; a free of it
// before the outermost forward returns uncharges it. When the outermost forward returns, each
// frame's retention is the bytes still live among those allocated inside it or inside its
// children -- what autograd keeps for backward, plus the outputs -- which is exactly what
// activation checkpointing of that module would have saved.
//
// Backward peak: each backward call is a window (nested like the modules). The window's peak is
// the highest live total while it is open; a closing child folds its peak into its parent.
// The row keeps the largest (peak - live at the window's start) over the calls.
//
// Live by module: each allocation made inside a forward is also charged, for as long as it
// lives, to the module of the innermost open frame (the Ledger keeps that module id with the
// block, so a free after the forward returned still finds it). A module whose live bytes grow
// from step to step keeps something it allocated (a list of outputs, a growing cache): the OOM
// post-mortem names it as a leak. Allocations outside forwards are nobody's.
//
// Forward calls that start inside an open backward window are recomputations (activation
// checkpointing): they are part of that backward's peak and not counted as forward calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vramscope::attribution {

/// No frame (allocations made outside any forward).
inline constexpr uint64_t no_frame = 0;

/// One module's totals on one device.
struct ModuleTotals {
  /// The id the hooks gave the module (its path, interned on the Python side).
  uint32_t module_id = 0;
  /// Forward calls that returned, and the bytes they left alive (summed, and the largest).
  uint64_t forward_calls = 0;
  uint64_t retained_bytes = 0;
  uint64_t max_retained_bytes = 0;
  /// Backward windows closed as measured, and their largest peak above their start.
  uint64_t backward_calls = 0;
  uint64_t backward_peak_bytes = 0;
  /// Bytes live now that were allocated while this module was the innermost open forward.
  uint64_t live_bytes = 0;
};

/// Module frames and backward windows of one device (no locking: the Ledger's owner locks).
class ModuleFrames {
 public:
  /// Opens a forward frame of `module_id` inside the innermost open one.
  void forward_enter(uint32_t module_id);
  /// Closes the innermost open forward frame of `module_id` (and any left open above it).
  /// When it was the outermost, computes every frame's retention into the rows. Returns false
  /// when no such frame is open (an exit whose enter was not seen).
  bool forward_exit(uint32_t module_id);
  /// The frame an allocation made now is charged to (no_frame outside forwards).
  uint64_t current_frame() const;
  /// The module of the innermost open frame (meaningful only when current_frame() is not
  /// no_frame).
  uint32_t current_module() const;
  /// An allocation of `size_bytes` charged to `frame` (from current_frame()).
  void on_alloc(uint64_t frame, int64_t size_bytes);
  /// The free of an allocation charged to `frame`; frames of finished forwards are ignored.
  void on_free(uint64_t frame, int64_t size_bytes);
  /// A live block of `size_bytes` charged to `module_id` appeared (alloc) or went (!alloc).
  /// The caller pairs them: each block is added once and removed once, with the same size.
  void add_live(uint32_t module_id, uint64_t size_bytes, bool alloc);
  /// Bytes live now charged to `module_id` (0 for a module never seen).
  uint64_t live_bytes(uint32_t module_id) const {
    return module_id < m_rows.size() ? m_rows[module_id].live_bytes : 0;
  }

  /// Opens a backward window of `module_id` with `live_bytes` live now.
  void backward_enter(uint32_t module_id, int64_t live_bytes);
  /// Closes the innermost open window of `module_id` (windows above it are dropped, their peaks
  /// folded in). `measured`: record it in the row (false: only fold its peak into the parent).
  /// Returns false when no such window is open.
  bool backward_exit(uint32_t module_id, bool measured);
  /// The live total rose to `live_bytes` (called after every increase).
  void on_live(int64_t live_bytes) {
    if (!m_windows.empty() && live_bytes > m_windows.back().peak_bytes) {
      m_windows.back().peak_bytes = live_bytes;
    }
  }

  /// Every module with a closed forward or backward or live bytes, in module-id order.
  std::vector<ModuleTotals> rows() const;
  /// Open forward frames and backward windows (for tests and sanity checks).
  std::size_t forward_depth() const { return m_stack.size(); }
  std::size_t backward_depth() const { return m_windows.size(); }

 private:
  struct Frame {
    uint32_t module_id = 0;
    /// Index of the parent frame in m_frames, or -1 for the outermost.
    int32_t parent = -1;
    /// Bytes allocated inside this frame (not its children) and not freed yet.
    int64_t live_bytes = 0;
  };
  struct Window {
    uint32_t module_id = 0;
    int64_t start_bytes = 0;
    int64_t peak_bytes = 0;
  };

  ModuleTotals& row(uint32_t module_id);
  /// Index in m_frames of a frame id of the running forward, or -1.
  int64_t index_of(uint64_t frame) const;
  void finish_forward();
  /// Pops the top window, folding its peak into the next one.
  Window pop_window();

  /// Frames of the running outermost forward; frame id = m_first_frame + index.
  std::vector<Frame> m_frames;
  std::vector<int32_t> m_stack;
  uint64_t m_first_frame = 1;
  /// Forward enters ignored because they were recomputations inside a backward window.
  std::size_t m_ignored_forward_depth = 0;
  std::vector<Window> m_windows;
  /// Indexed by module id (ids are small: the hooks number module paths from 1).
  std::vector<ModuleTotals> m_rows;
};

}  // namespace vramscope::attribution
