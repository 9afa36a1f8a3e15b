// src/attribution/include/vramscope/attribution/attributor.hpp -- the ledgers of every device, fed by the agent thread
//
// Off by default: the agent thread hands every drained batch to consume(), which returns at once
// unless a profile() or a category-tracking Monitor holds the attributor (acquire/release,
// counted, so both can overlap). The first acquire starts fresh ledgers; the bytes live at that
// moment are charged to the "(before)" pseudo-op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "vramscope/attribution/ledger.hpp"
#include "vramscope/tracking/events.hpp"

namespace vramscope::attribution {

/// Per-device ledgers behind one mutex.
class Attributor {
 public:
  explicit Attributor(std::size_t device_count);

  /// Applies drained events of `device` (agent thread; a no-op while nobody holds it).
  void consume(std::size_t device, const std::vector<tracking::Event>& events);
  /// Takes a hold; the first one starts new ledgers with `live_before_bytes[device]` live.
  /// Returns true when this call started them.
  bool acquire(const std::vector<uint64_t>& live_before_bytes);
  /// Drops a hold; the last one stops attribution (the ledgers stay readable). Returns false
  /// when there was no hold.
  bool release();
  /// Is anyone holding the attributor?
  bool active() const;
  /// Have ledgers ever been started (so tables exist)?
  bool has_ledgers() const;
  std::size_t device_count() const { return m_device_count; }

  /// Runs `fn` on `device`'s ledger under the lock; false when no ledgers exist.
  bool with_ledger(std::size_t device, const std::function<void(Ledger&)>& fn);

 private:
  std::size_t m_device_count;
  mutable std::mutex m_mutex;
  std::vector<std::unique_ptr<Ledger>> m_ledgers;
  int m_holds = 0;
};

}  // namespace vramscope::attribution
