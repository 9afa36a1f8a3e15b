// src/attribution/include/vramscope/attribution/op_registry.hpp -- operator names as small ids, call counts, the per-thread op stack
//
// RecordFunction start/end callbacks (agent/torchlib/torch_library.cpp) run on every thread that
// runs an operator: the Python thread, autograd threads, at::launch workers. The allocator tracker
// reads the innermost op of the thread it runs on, so the stack is thread_local and lock-free.
// Names are interned once per thread through a thread-local cache; only a name never seen by
// that thread takes the registry's mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vramscope::attribution {

/// Interned operator names and how often each op started.
class OpRegistry {
 public:
  /// At most `capacity` names (the two pseudo-ops included); later names map to no_op_id.
  explicit OpRegistry(std::size_t capacity = 1U << 16U);

  /// The id of `name`, interning it on first sight. Safe from any thread; lock-free when this
  /// thread has seen the name before.
  uint32_t intern(std::string_view name);
  /// Counts one start of `op_id` (relaxed atomic add).
  void count_call(uint32_t op_id) noexcept {
    if (op_id < m_capacity) m_calls[op_id].fetch_add(1, std::memory_order_relaxed);
  }
  /// The name of `op_id` ("(no op)" and "(before)" for the pseudo-ops, "?" when unknown).
  std::string name(uint32_t op_id) const;
  /// Calls of every id so far, indexed by id (subtract two of these for an interval).
  std::vector<uint64_t> call_counts() const;
  /// Names interned so far (pseudo-ops included).
  std::size_t size() const;

 private:
  std::size_t m_capacity;
  std::unique_ptr<std::atomic<uint64_t>[]> m_calls;
  mutable std::mutex m_mutex;
  /// Stable storage for names (deque: no reallocation moves them).
  std::deque<std::string> m_names;
  std::unordered_map<std::string_view, uint32_t> m_ids;
  /// Distinguishes registries in the thread-local caches (tests create several).
  uint64_t m_generation;
};

/// Pushes `op_id` as this thread's innermost op; `key` identifies the scope (the RecordFunction
/// object) so that pop() can match it. Beyond the maximum depth only the depth is counted.
void push_op(const void* key, uint32_t op_id) noexcept;
/// Pops the scope `key` if it is the innermost one (or a few levels down, dropping the ones
/// above whose end never came); an end without a start is ignored.
void pop_op(const void* key) noexcept;
/// This thread's innermost op, or 0 (no_op_id). The tracker asks only while a profile tracks ops
/// (DeviceProducer::op_tracking): outside one the stack is not maintained (it may hold scopes
/// whose end came after the callback was disabled).
uint32_t current_op() noexcept;

}  // namespace vramscope::attribution
