// src/attribution/include/vramscope/attribution/ledger.hpp -- who holds the memory: live bytes per operator and per category
//
// The agent thread feeds every drained allocator event of one device into a Ledger. Each event
// carries the innermost profiled operator of the thread that allocated or freed (op_id) and the
// training phase at that moment, both set by the tracker callback. The ledger keeps an
// address -> (op, size, category, module frame) map, so frees are matched to their allocation
// exactly (and uncharge the module that allocated it, see module_frames.hpp), and
// keeps per op and per category: bytes allocated, bytes freed while the op ran, live bytes, and
// the live bytes at the moment of the peak of each PeakMark.
//
// Live-at-peak without copying at every new peak: a new peak bumps the mark's generation; an
// accumulator whose stamp is older than the generation has not changed since the peak, so its
// value at the peak is its live value, which it saves into at_peak just before its next change.
// Every update is O(1) (plus one hash-map operation on the address).
//
// Memory live before the ledger started is charged to the pseudo-op before_op_id and to
// Category::Other until tag() tells what it is (parameters, optimizer state, ...).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vramscope/attribution/module_frames.hpp"
#include "vramscope/sample.hpp"
#include "vramscope/tracking/events.hpp"
#include "vramscope/tracking/peak_mark.hpp"

namespace vramscope::attribution {

/// What a live allocation is, for the per-category breakdown: the public MemoryCategory, so
/// the ledger's totals are in export order already.
using Category = MemoryCategory;
inline constexpr std::size_t category_count = memory_category_count;

/// Lower-case name: memory_category_names[category].
std::string_view category_name(Category category);

/// Where the training loop is, as set by the module and optimizer hooks.
enum class Phase : uint8_t { Other = 0, Forward = 1, Backward = 2, Optimizer = 3 };

/// The category of an untagged allocation made during `phase`.
Category category_of_phase(Phase phase);

/// Allocations made outside any profiled operator.
inline constexpr uint32_t no_op_id = 0;
/// Memory that was live before the ledger started.
inline constexpr uint32_t before_op_id = 1;
/// The first id an interned operator name gets.
inline constexpr uint32_t first_named_op_id = 2;

/// Which peak a live-at-peak column refers to: the ledger keeps PeakMark::Profile (since the
/// ledger started or the last restart_peak(Profile), a profile() window) and PeakMark::Step.
using tracking::PeakMark;
inline constexpr std::size_t ledger_mark_count = 2;

/// One operator's totals on one device.
struct OpTotals {
  uint32_t op_id = 0;
  /// Allocations made while this op was the innermost one, and their requested bytes.
  uint64_t alloc_count = 0;
  uint64_t allocated_bytes = 0;
  /// Bytes freed (free requested) while this op was the innermost one, whoever allocated them;
  /// allocated - freed is the profiler's "self" memory.
  uint64_t self_freed_bytes = 0;
  /// Bytes this op allocated that are still live.
  uint64_t live_bytes = 0;
  /// Bytes this op allocated that were live at the peak of the mark asked for.
  uint64_t live_at_peak_bytes = 0;
};

/// One category's live bytes now and at the peak of the mark asked for.
struct CategoryTotals {
  Category category = Category::Other;
  uint64_t live_bytes = 0;
  uint64_t live_at_peak_bytes = 0;
};

/// The live-at-peak bytes of Ledger::categories() in MemoryCategory (export) order.
CategoryBytes category_bytes_at_peak(const std::array<CategoryTotals, category_count>& totals);

/// Live memory of one device by operator and category, from its event stream.
class Ledger {
 public:
  /// `live_before_bytes`: requested bytes already live when the ledger starts.
  explicit Ledger(uint64_t live_before_bytes = 0);

  /// Applies one event (Alloc, FreeRequested, FreeCompleted; others are ignored).
  void on_event(const tracking::Event& event);
  /// Says that the live allocation at `address` (of `size_bytes`, used when the ledger has not
  /// seen it: it predates the ledger) is a `category`. Its bytes move category now and, when it
  /// was already live at a mark's peak, at that peak too. Returns false when `size_bytes` is 0.
  bool tag(uint64_t address, uint64_t size_bytes, Category category);
  /// Restarts `mark`'s peak at the current live bytes.
  void restart_peak(PeakMark mark);

  /// Requested bytes live now (including those from before the ledger started).
  uint64_t live_bytes() const { return clamp(m_live_bytes); }
  /// Highest live bytes since `mark` was restarted.
  uint64_t peak_bytes(PeakMark mark) const { return clamp(m_peaks[index(mark)].bytes); }
  /// Every op with any activity, in op-id order, with live-at-peak for `mark`.
  std::vector<OpTotals> ops(PeakMark mark) const;
  /// Every category, in enum order, with live-at-peak for `mark`.
  std::array<CategoryTotals, category_count> categories(PeakMark mark) const;
  /// Allocations tracked by address now.
  std::size_t tracked_allocations() const { return m_allocations.size(); }
  /// Frees of addresses the ledger never saw allocated (live before it started).
  uint64_t untracked_free_count() const { return m_untracked_frees; }
  /// Per-module forward retention, backward peaks and live bytes, fed by this ledger's events.
  /// Open and close module windows here, in event order (the agent drains the rings first).
  ModuleFrames& modules() { return m_modules; }
  const ModuleFrames& modules() const { return m_modules; }
  /// Opens a backward window of `module_id` at the live bytes now.
  void backward_enter(uint32_t module_id) { m_modules.backward_enter(module_id, m_live_bytes); }

 private:
  /// A quantity with a value saved at each mark's last peak (see file comment).
  struct Accumulator {
    int64_t live = 0;
    std::array<int64_t, ledger_mark_count> at_peak{};
    std::array<uint64_t, ledger_mark_count> stamp{};
  };
  struct OpAccumulator {
    Accumulator bytes;
    uint64_t alloc_count = 0;
    uint64_t allocated_bytes = 0;
    uint64_t self_freed_bytes = 0;
  };
  struct Allocation {
    uint64_t size_bytes = 0;
    uint64_t sequence = 0;
    /// The module forward frame it was charged to (no_frame outside forwards).
    uint64_t frame = no_frame;
    uint32_t op_id = 0;
    /// The module of that frame (its live bytes by module; unused when frame is no_frame).
    uint32_t module_id = 0;
    Category category = Category::Other;
  };
  struct Peak {
    int64_t bytes = 0;
    uint64_t generation = 1;
    /// Allocations with a sequence number up to this one were live at the peak if still live.
    uint64_t sequence = 0;
  };

  /// The slot of one of the two marks the ledger keeps (anything but Step is the Profile one:
  /// the agent asks for those two only).
  static constexpr std::size_t index(PeakMark mark) { return mark == PeakMark::Step ? 1 : 0; }
  static uint64_t clamp(int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }
  /// Saves the accumulator's live value into at_peak for every mark whose peak is newer.
  void touch(Accumulator& acc) const;
  int64_t at_peak(const Accumulator& acc, PeakMark mark) const;
  OpAccumulator& op(uint32_t op_id);
  /// Adds `delta` to the live bytes of `op_id` and `category` (and the total), then moves the
  /// peaks.
  void add_live(uint32_t op_id, Category category, int64_t delta);
  void free_completed(uint64_t address, uint64_t size_bytes);

  std::unordered_map<uint64_t, Allocation> m_allocations;
  std::vector<OpAccumulator> m_ops;
  std::array<Accumulator, category_count> m_categories{};
  std::array<Peak, ledger_mark_count> m_peaks{};
  int64_t m_live_bytes = 0;
  uint64_t m_sequence = 0;
  uint64_t m_untracked_frees = 0;
  ModuleFrames m_modules;
};

}  // namespace vramscope::attribution
