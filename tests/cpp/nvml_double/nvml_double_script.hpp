// tests/cpp/nvml_double/nvml_double_script.hpp -- the NVML double's state, read from its JSON script
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace vramscope_double {

/// NVML return codes the double produces (numbering of nvml.h).
enum Code : int {
  CodeSuccess = 0,
  CodeUninitialized = 1,
  CodeInvalidArgument = 2,
  CodeNotSupported = 3,
  CodeNotFound = 6,
  CodeInsufficientSize = 7,
  CodeArgumentVersionMismatch = 25,
  CodeUnknown = 999,
};

/// Which list a process appears in (bits, like vramscope's ProcessKind).
enum ProcessKindBit : unsigned { KindCompute = 1, KindGraphics = 2, KindMps = 4 };

/// Calls whose result a script can force ("errors": {"memory_v2": "NOT_SUPPORTED"}).
enum ErrorKey : int {
  ErrHandle,
  ErrName,
  ErrUuid,
  ErrPci,
  ErrMemory,
  ErrMemoryV2,
  ErrBar1,
  ErrComputeProcesses,
  ErrGraphicsProcesses,
  ErrMpsProcesses,
  ErrMigMode,
  ErrMaxMigDevices,
  ErrMigHandle,
  ErrCount,
};

struct Process {
  unsigned pid = 0;
  unsigned long long used = 0;
  unsigned kinds = KindCompute;
  unsigned gpu_instance_id = 0xFFFFFFFFU;
  unsigned compute_instance_id = 0xFFFFFFFFU;
};

/// A GPU or a MIG device: what one nvmlDevice_t answers.
struct Entity {
  bool is_mig = false;
  /// Index of the GPU (of the parent GPU for a MIG device).
  unsigned index = 0;
  std::string name;
  std::string uuid;
  unsigned pci_domain = 0, pci_bus = 0, pci_device = 0;
  bool has_memory = false;
  unsigned long long total = 0, reserved = 0, used = 0, free = 0;
  bool has_bar1 = false;
  unsigned long long bar1_total = 0, bar1_used = 0;
  /// -1: MIG not supported.
  int mig_mode = -1;
  unsigned max_mig_devices = 7;
  unsigned slot = 0;
  unsigned gpu_instance_id = 0xFFFFFFFFU, compute_instance_id = 0xFFFFFFFFU;
  std::vector<Entity> mig_instances;
  std::vector<Process> processes;
  /// Forced result per ErrorKey; 0 means "answer normally".
  std::array<int, ErrCount> errors{};
  unsigned grow_times = 0, grow_by = 0, grown = 0;

  /// Appends grow_by processes if growth is still scripted.
  void grow();
};

/// Everything the script says, plus the init reference count.
struct State {
  std::string driver_version = "999.99.99";
  int init_result = CodeSuccess;
  int count_result = CodeSuccess;
  std::vector<Entity> devices;
  int init_depth = 0;

  /// (Re)reads $VRAMSCOPE_NVML_DOUBLE_SCRIPT; prints why to stderr and returns false on error.
  bool load_from_env();
  /// Handles are indices (GPU index, MIG position), so they survive a reload.
  static void* handle_of(unsigned device, int mig_position);
  /// The entity a handle names now, or null.
  Entity* entity_of(void* handle);
  /// Position in parent.mig_instances of the instance in `slot`, or -1.
  static int mig_position(const Entity& parent, unsigned slot);
};

/// The one state of the loaded library.
State& state();
/// NVML's text for a code (a static string).
const char* error_string(int code);
/// The call counter of function `name` (created on first use; the reference stays valid).
unsigned long long& call_counter(const char* name);
/// Current count of `name`; 0 if never called.
unsigned long long calls_of(const char* name);
/// Zeroes every counter.
void reset_calls();

}  // namespace vramscope_double
