// src/attribution/op_registry.cpp -- interning with thread-local caches; the thread-local op stack
#include "vramscope/attribution/op_registry.hpp"

#include "vramscope/attribution/ledger.hpp"

namespace vramscope::attribution {
namespace {

std::atomic<uint64_t> g_registry_generation{1};

/// Heterogeneous lookup so that a cache hit does not build a std::string.
struct NameHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct NameCache {
  uint64_t generation = 0;
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> ids;
};

thread_local NameCache t_cache;

/// Deep enough for any real nesting (module -> aten op -> aten op ...); deeper scopes are only
/// counted so that their ends do not pop the wrong entry.
constexpr std::size_t max_depth = 64;

struct OpStack {
  const void* keys[max_depth];
  uint32_t ids[max_depth];
  std::size_t depth;
  std::size_t overflow;
};

// Plain data with constant initialisation: no TLS init guard on the tracker's hot path.
constinit thread_local OpStack t_stack{};

}  // namespace

OpRegistry::OpRegistry(std::size_t capacity)
    : m_capacity(capacity < first_named_op_id + 1 ? first_named_op_id + 1 : capacity),
      m_calls(std::make_unique<std::atomic<uint64_t>[]>(m_capacity)),
      m_generation(g_registry_generation.fetch_add(1)) {
  m_names.emplace_back("(no op)");
  m_names.emplace_back("(before)");
}

uint32_t OpRegistry::intern(std::string_view name) {
  NameCache& cache = t_cache;
  if (cache.generation != m_generation) {
    cache.ids.clear();
    cache.generation = m_generation;
  }
  if (const auto hit = cache.ids.find(name); hit != cache.ids.end()) return hit->second;
  uint32_t id = no_op_id;
  {
    std::lock_guard lock(m_mutex);
    if (const auto known = m_ids.find(name); known != m_ids.end()) {
      id = known->second;
    } else if (m_names.size() < m_capacity) {
      id = static_cast<uint32_t>(m_names.size());
      m_names.emplace_back(name);
      m_ids.emplace(m_names.back(), id);
    }
  }
  // A full registry answers no_op_id; caching that keeps the overflow path lock-free too.
  cache.ids.emplace(std::string(name), id);
  return id;
}

std::string OpRegistry::name(uint32_t op_id) const {
  std::lock_guard lock(m_mutex);
  return op_id < m_names.size() ? m_names[op_id] : std::string("?");
}

std::vector<uint64_t> OpRegistry::call_counts() const {
  std::size_t count = 0;
  {
    std::lock_guard lock(m_mutex);
    count = m_names.size();
  }
  std::vector<uint64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = m_calls[i].load(std::memory_order_relaxed);
  return out;
}

std::size_t OpRegistry::size() const {
  std::lock_guard lock(m_mutex);
  return m_names.size();
}

void push_op(const void* key, uint32_t op_id) noexcept {
  OpStack& s = t_stack;
  if (s.depth >= max_depth) {
    ++s.overflow;
    return;
  }
  s.keys[s.depth] = key;
  s.ids[s.depth] = op_id;
  ++s.depth;
}

void pop_op(const void* key) noexcept {
  OpStack& s = t_stack;
  if (s.overflow > 0) {
    --s.overflow;
    return;
  }
  // Search a few levels: a scope whose end was never delivered (its callback was enabled
  // between start and end elsewhere) must not wedge the stack.
  constexpr std::size_t max_search = 4;
  for (std::size_t i = 0; i < max_search && i < s.depth; ++i) {
    if (s.keys[s.depth - 1 - i] == key) {
      s.depth -= i + 1;
      return;
    }
  }
}

uint32_t current_op() noexcept {
  const OpStack& s = t_stack;
  return s.depth == 0 ? no_op_id : s.ids[s.depth - 1];
}

}  // namespace vramscope::attribution
