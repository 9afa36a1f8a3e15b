// src/attribution/include/vramscope/attribution/session.hpp -- the attribution policy: one profile at a time, counted holds on the ledgers, streaming on and off
//
// What used to live in the agent's binding lambdas, torch-free so that C++ tests can drive it:
//   - profile(): at most one at a time; it enables op tracking (torch's RecordFunction callback,
//     behind OpSwitch), restarts the profile peaks of the core and of every ledger, and notes
//     the per-op call counts so that op tables report calls since the profile started;
//   - holds: a profile and any number of category-tracking Monitors share the ledgers; the
//     first hold starts the event stream into the ring (AgentCore::set_streaming) and fresh
//     ledgers, the last release stops the stream (the tables stay readable);
//   - step categories: while any hold on them is taken and the ledgers are active, each step
//     record carries the category breakdown at the step's peak.
// Every change that touches the stream runs inside AgentCore::flush(), under the core's lock,
// so it lands after every event that happened before it and cannot interleave with another.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "vramscope/attribution/attributor.hpp"
#include "vramscope/attribution/op_registry.hpp"
#include "vramscope/tracking/agent_core.hpp"

namespace vramscope::attribution {

/// Switches per-op tracking on and off outside this layer (torch's RecordFunction callback in
/// the agent). Called with the session's lock held, never concurrently.
class OpSwitch {
 public:
  virtual ~OpSwitch() = default;
  /// Starts calling the op stack's push/pop for a `sampling` fraction of ops.
  virtual void enable(double sampling) = 0;
  /// Stops it (the callback may stay registered, disabled).
  virtual void disable() = 0;
};

/// The ledgers' owner and the policy over them for one attached core.
class AttributionSession {
 public:
  /// Feeds `core`'s drained events to the ledgers and annotates its step records; both `core`
  /// and `ops` must outlive the session. Call before events flow.
  AttributionSession(tracking::AgentCore& core, OpSwitch& ops);
  AttributionSession(const AttributionSession&) = delete;
  AttributionSession& operator=(const AttributionSession&) = delete;

  /// Starts a profile: std::invalid_argument unless 0 < sampling <= 1, std::runtime_error
  /// while one is running.
  void start_profile(double sampling);
  /// Stops the running profile (nothing when none runs); its tables stay readable.
  void stop_profile();
  /// Is a profile running?
  bool profiling() const;

  /// Takes a hold on the ledgers (the first starts them with the bytes live now as "(before)").
  void acquire();
  /// Drops one hold; the last one stops the event stream. A release without a hold does nothing.
  void release();
  /// Is anyone (a profile, a Monitor) holding the ledgers?
  bool active() const { return m_attributor.active(); }

  /// Takes (true) or drops (false) a hold on the category breakdown in step records; a drop
  /// without a hold does nothing.
  void hold_step_categories(bool hold);

  /// Runs `fn` on `device`'s ledger after draining every event before this call; false when no
  /// ledgers exist yet.
  bool with_ledger(std::size_t device, const std::function<void(Ledger&)>& fn);
  /// Calls of each op id since the current (or last) profile started, indexed by op id.
  std::vector<uint64_t> calls_since_profile_start() const;

  OpRegistry& registry() { return m_registry; }
  Attributor& attributor() { return m_attributor; }
  tracking::AgentCore& core() { return m_core; }

 private:
  void acquire_locked_stream();
  std::optional<CategoryBytes> step_annotation(std::size_t device);

  tracking::AgentCore& m_core;
  OpSwitch& m_ops;
  /// Interned op names and per-op call counts (RecordFunction's start callback writes them).
  OpRegistry m_registry;
  Attributor m_attributor;
  /// Serialises profile start/stop (the Python callers hold the GIL, C++ tests may not).
  mutable std::mutex m_profile_mutex;
  /// Is a profile running?
  bool m_profiling = false;
  /// Per-op call counts when the current (or last) profile started.
  std::vector<uint64_t> m_calls_at_start;
  /// Holds on the category breakdown in step records (read by the agent thread at each step).
  std::atomic<int> m_step_category_holds{0};
};

}  // namespace vramscope::attribution
