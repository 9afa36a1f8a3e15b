// agent/torch_bridge.cpp -- torch_hooks.hpp over the torch-facing library's C table (agent/torchlib/torch_api.h)
//
// The library is dlopened once per process with RTLD_LOCAL: its only exported symbol is
// vramscope_torch_api, and its torch libraries are those `import torch` loaded already (same
// sonames), so it binds the torch the program runs. It is never unloaded: torch keeps its
// tracker, observer and callbacks until exit.
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "torch_hooks.hpp"
#include "torchlib/torch_api.h"
#include "vramscope/attribution/op_registry.hpp"
#include "vramscope/version.hpp"

namespace vramscope::agent {
namespace {

/// The loaded table (null before load_torch_library) and the path it came from.
const VramscopeTorchApi* loaded_api = nullptr;
std::string loaded_path;
std::mutex load_mutex;

const VramscopeTorchApi& api() {
  if (loaded_api == nullptr) {
    throw std::runtime_error("vramscope: no torch-facing library is loaded (load_torch first)");
  }
  return *loaded_api;
}

/// Throws torch's message when `ok` is false.
void check(bool ok, const VramscopeTorchError& error) {
  if (!ok) throw std::runtime_error(error.message);
}

uint32_t current_op_of_thread() { return attribution::current_op(); }

/// The registry the op callbacks intern names into, published by RecordFunctionSwitch::enable()
/// before a callback can run: the library's callbacks carry no context.
std::atomic<attribution::OpRegistry*> op_registry{nullptr};

/// Runs for each op scope on any thread: `scope` (the RecordFunction) identifies the scope, so
/// that the end matches its start. Never throws.
void op_started_c(const char* name, std::size_t name_size, const void* scope) {
  // Only an attached session enables the callback, so there is a registry; the check is a load.
  attribution::OpRegistry* registry = op_registry.load(std::memory_order_acquire);
  if (registry == nullptr) return;
  try {
    const uint32_t id = registry->intern(std::string_view(name, name_size));
    registry->count_call(id);
    attribution::push_op(scope, id);
  } catch (...) {
    // Interning allocates; an op must not fail because attribution could not name it.
  }
}

void op_ended_c(const void* scope) { attribution::pop_op(scope); }

void on_segment(void* context, const VramscopeTorchSegment* segment,
                const VramscopeTorchBlock* blocks, std::size_t block_count) {
  auto* out = static_cast<std::vector<attribution::SegmentView>*>(context);
  attribution::SegmentView s;
  s.device = segment->device;
  s.address = segment->address;
  s.total_bytes = segment->total_bytes;
  s.requested_bytes = segment->requested_bytes;
  s.allocated_bytes = segment->allocated_bytes;
  s.active_bytes = segment->active_bytes;
  s.stream = segment->stream;
  s.is_large = segment->is_large;
  s.is_expandable = segment->is_expandable;
  s.blocks.reserve(block_count);
  for (std::size_t i = 0; i < block_count; ++i) {
    s.blocks.push_back({blocks[i].size_bytes, blocks[i].requested_bytes,
                        static_cast<attribution::BlockState>(blocks[i].state)});
  }
  out->push_back(std::move(s));
}

}  // namespace

std::string load_torch_library(const std::string& path) {
  std::lock_guard lock(load_mutex);
  if (loaded_api != nullptr) {
    if (path == loaded_path) return loaded_api->torch_version;
    throw std::runtime_error("vramscope: the torch-facing library " + loaded_path +
                             " is loaded already; a process loads one");
  }
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    throw std::runtime_error(std::string("cannot load ") + path + ": " + (why ? why : "?"));
  }
  using Entry = const VramscopeTorchApi* (*)(uint32_t, const char*, uint64_t);
  auto entry = reinterpret_cast<Entry>(::dlsym(handle, "vramscope_torch_api"));
  const VramscopeTorchApi* table =
      entry == nullptr
          ? nullptr
          : entry(VRAMSCOPE_TORCH_API_VERSION, VRAMSCOPE_VERSION, vramscope_torch_layout());
  if (table == nullptr) {
    ::dlclose(handle);
    throw std::runtime_error(path + " was built from other vramscope sources than this extension");
  }
  loaded_api = table;
  loaded_path = path;
  return table->torch_version;
}

std::string loaded_torch_version() { return api().torch_version; }

std::string allocator_backend() {
  char name[64] = {};
  VramscopeTorchError error{};
  if (!api().allocator_backend(name, sizeof name, &error)) {
    return std::string("unknown (") + error.message + ")";
  }
  return name;
}

int cuda_device_count() { return loaded_api == nullptr ? 0 : loaded_api->cuda_device_count(); }

bool allocator_initialised() {
  return loaded_api != nullptr && loaded_api->allocator_initialised();
}

std::optional<tracking::TorchStats> read_device_stats(std::size_t device) noexcept {
  VramscopeTorchStats c{};
  if (loaded_api == nullptr || !loaded_api->read_device_stats(device, &c)) return std::nullopt;
  tracking::TorchStats out;
  out.allocated_bytes = c.allocated_bytes;
  out.peak_allocated_bytes = c.peak_allocated_bytes;
  out.reserved_bytes = c.reserved_bytes;
  out.peak_reserved_bytes = c.peak_reserved_bytes;
  out.requested_bytes = c.requested_bytes;
  out.peak_requested_bytes = c.peak_requested_bytes;
  out.active_bytes = c.active_bytes;
  out.inactive_split_bytes = c.inactive_split_bytes;
  return out;
}

bool read_totals_in_callback(void* context, tracking::AllocatorTotals* out) noexcept {
  return loaded_api != nullptr && loaded_api->read_totals_in_callback(context, out);
}

uint64_t allocated_bytes_now(std::size_t device) {
  uint64_t bytes = 0;
  VramscopeTorchError error{};
  check(api().allocated_bytes_now(device, &bytes, &error), error);
  return bytes;
}

void attach_trace_tracker(tracking::TrackerTarget target) {
  VramscopeTorchError error{};
  check(api().attach_trace_tracker(&target, &current_op_of_thread, &error), error);
}

void attach_cpu_proxy_tracker(tracking::TrackerTarget target) {
  VramscopeTorchError error{};
  check(api().attach_cpu_proxy(&target, &current_op_of_thread, &error), error);
}

void attach_oom_observer(OomSink sink, void* context, std::size_t device_count) {
  VramscopeTorchError error{};
  check(api().attach_oom_observer(sink, context, device_count, &error), error);
}

void empty_cache() {
  VramscopeTorchError error{};
  check(api().empty_cache(&error), error);
}

std::vector<attribution::SegmentView> capture_segments(std::size_t max_blocks) {
  std::vector<attribution::SegmentView> out;
  VramscopeTorchError error{};
  check(api().capture_segments(max_blocks, &out, &on_segment, &error), error);
  return out;
}

void RecordFunctionSwitch::enable(double sampling) {
  op_registry.store(m_registry, std::memory_order_release);
  auto found = m_callbacks.find(sampling);
  if (found == m_callbacks.end()) {
    uint64_t handle = 0;
    VramscopeTorchError error{};
    check(api().add_op_callback(sampling, &op_started_c, &op_ended_c, &handle, &error), error);
    found = m_callbacks.emplace(sampling, handle).first;
  } else {
    api().reenable_op_callback(found->second);
  }
  m_enabled = found->second;
}

void RecordFunctionSwitch::disable() {
  if (m_enabled == 0) return;
  api().disable_op_callback(m_enabled);
  m_enabled = 0;
}

bool trace_entries_carry_pools() { return api().trace_entries_carry_pools(); }

#if VRAMSCOPE_BENCH_HOOKS
void attach_noop_trace_tracker() {
  VramscopeTorchError error{};
  check(api().attach_noop_tracker(&error), error);
}

double time_alloc_pairs(std::size_t pairs, std::size_t size_bytes) {
  if (pairs == 0 || size_bytes == 0)
    throw std::invalid_argument("pairs and size_bytes must be > 0");
  double ns = 0;
  VramscopeTorchError error{};
  check(api().time_alloc_pairs(pairs, size_bytes, &ns, &error), error);
  return ns;
}

void pause_torch_tracker(bool paused) { api().pause_tracking(paused); }
#endif  // VRAMSCOPE_BENCH_HOOKS

}  // namespace vramscope::agent
