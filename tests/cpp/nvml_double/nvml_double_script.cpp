// tests/cpp/nvml_double/nvml_double_script.cpp -- the NVML double's state, read from its JSON script
//
// The script format is documented at the top of nvml_double.cpp and in docs/testing.md.
// Unknown keys are errors, so a typo in a test script fails loudly instead of being ignored.
#include "nvml_double_script.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace vramscope_double {
namespace {

using nlohmann::json;

/// Codes by their nvml.h name without NVML_ERROR_ (and SUCCESS).
const std::map<std::string, int>& code_names() {
  static const std::map<std::string, int> names = {
      {"SUCCESS", 0},
      {"UNINITIALIZED", 1},
      {"INVALID_ARGUMENT", 2},
      {"NOT_SUPPORTED", 3},
      {"NO_PERMISSION", 4},
      {"NOT_FOUND", 6},
      {"INSUFFICIENT_SIZE", 7},
      {"INSUFFICIENT_POWER", 8},
      {"DRIVER_NOT_LOADED", 9},
      {"TIMEOUT", 10},
      {"IRQ_ISSUE", 11},
      {"LIBRARY_NOT_FOUND", 12},
      {"FUNCTION_NOT_FOUND", 13},
      {"CORRUPTED_INFOROM", 14},
      {"GPU_IS_LOST", 15},
      {"RESET_REQUIRED", 16},
      {"OPERATING_SYSTEM", 17},
      {"LIB_RM_VERSION_MISMATCH", 18},
      {"IN_USE", 19},
      {"MEMORY", 20},
      {"NO_DATA", 21},
      {"ARGUMENT_VERSION_MISMATCH", 25},
      {"DEPRECATED", 26},
      {"NOT_READY", 27},
      {"GPU_NOT_FOUND", 28},
      {"UNKNOWN", 999},
  };
  return names;
}

const std::map<std::string, ErrorKey>& error_keys() {
  static const std::map<std::string, ErrorKey> keys = {
      {"handle", ErrHandle},
      {"name", ErrName},
      {"uuid", ErrUuid},
      {"pci", ErrPci},
      {"memory", ErrMemory},
      {"memory_v2", ErrMemoryV2},
      {"bar1", ErrBar1},
      {"compute_processes", ErrComputeProcesses},
      {"graphics_processes", ErrGraphicsProcesses},
      {"mps_processes", ErrMpsProcesses},
      {"mig_mode", ErrMigMode},
      {"max_mig_devices", ErrMaxMigDevices},
      {"mig_handle", ErrMigHandle},
  };
  return keys;
}

int parse_code(const json& value) {
  if (value.is_number_integer()) return value.get<int>();
  const auto it = code_names().find(value.get<std::string>());
  if (it == code_names().end()) throw std::runtime_error("unknown NVML code " + value.dump());
  return it->second;
}

/// Throws if `object` has a key outside `allowed`.
void check_keys(const json& object, std::initializer_list<const char*> allowed, const char* where) {
  if (!object.is_object()) throw std::runtime_error(std::string(where) + " must be an object");
  for (const auto& item : object.items()) {
    bool known = false;
    for (const char* key : allowed) known = known || item.key() == key;
    if (!known)
      throw std::runtime_error(std::string("unknown key \"") + item.key() + "\" in " + where);
  }
}

Process parse_process(const json& p) {
  check_keys(p, {"pid", "used", "kinds", "gpu_instance_id", "compute_instance_id"}, "a process");
  Process process;
  const json& pid = p.at("pid");
  process.pid = pid.is_string() && pid.get<std::string>() == "self"
                    ? static_cast<unsigned>(getpid())
                    : pid.get<unsigned>();
  if (p.contains("used")) {
    const json& used = p["used"];
    process.used = used.is_string() && used.get<std::string>() == "n/a"
                       ? ~0ULL
                       : used.get<unsigned long long>();
  }
  if (p.contains("kinds")) {
    process.kinds = 0;
    for (const json& kind : p["kinds"]) {
      const std::string name = kind.get<std::string>();
      if (name == "compute") {
        process.kinds |= KindCompute;
      } else if (name == "graphics") {
        process.kinds |= KindGraphics;
      } else if (name == "mps") {
        process.kinds |= KindMps;
      } else {
        throw std::runtime_error("unknown process kind \"" + name + "\"");
      }
    }
  }
  process.gpu_instance_id = p.value("gpu_instance_id", 0xFFFFFFFFU);
  process.compute_instance_id = p.value("compute_instance_id", 0xFFFFFFFFU);
  return process;
}

void parse_common(const json& d, Entity& entity) {
  entity.name = d.value("name", std::string());
  entity.uuid = d.value("uuid", std::string());
  if (d.contains("memory")) {
    const json& m = d["memory"];
    check_keys(m, {"total", "reserved", "used", "free"}, "memory");
    entity.has_memory = true;
    entity.total = m.at("total").get<unsigned long long>();
    entity.reserved = m.value("reserved", 0ULL);
    entity.used = m.value("used", 0ULL);
    if (!m.contains("free") && entity.reserved + entity.used > entity.total) {
      throw std::runtime_error("memory: reserved + used exceed total (give \"free\" explicitly)");
    }
    entity.free = m.value("free", entity.total - entity.reserved - entity.used);
  }
  for (const json& p : d.value("processes", json::array()))
    entity.processes.push_back(parse_process(p));
  const json errors = d.value("errors", json::object());
  for (const auto& item : errors.items()) {
    const auto key = error_keys().find(item.key());
    if (key == error_keys().end())
      throw std::runtime_error("unknown error key \"" + item.key() + "\"");
    entity.errors[key->second] = parse_code(item.value());
  }
}

Entity parse_mig(const json& m, unsigned parent, unsigned position) {
  check_keys(m,
             {"slot", "name", "uuid", "gpu_instance_id", "compute_instance_id", "memory",
              "processes", "errors"},
             "a MIG instance");
  Entity entity;
  entity.is_mig = true;
  entity.index = parent;
  entity.slot = m.value("slot", position);
  parse_common(m, entity);
  entity.gpu_instance_id = m.value("gpu_instance_id", 0xFFFFFFFFU);
  entity.compute_instance_id = m.value("compute_instance_id", 0xFFFFFFFFU);
  return entity;
}

Entity parse_device(const json& d, unsigned index) {
  check_keys(d,
             {"name", "uuid", "pci", "memory", "bar1", "mig_mode", "max_mig_devices",
              "mig_instances", "processes", "errors", "grow_processes"},
             "a device");
  Entity entity;
  entity.index = index;
  parse_common(d, entity);
  if (d.contains("pci")) {
    const json& pci = d["pci"];
    check_keys(pci, {"domain", "bus", "device"}, "pci");
    entity.pci_domain = pci.value("domain", 0U);
    entity.pci_bus = pci.value("bus", 0U);
    entity.pci_device = pci.value("device", 0U);
  }
  if (d.contains("bar1")) {
    check_keys(d["bar1"], {"total", "used"}, "bar1");
    entity.has_bar1 = true;
    entity.bar1_total = d["bar1"].at("total").get<unsigned long long>();
    entity.bar1_used = d["bar1"].value("used", 0ULL);
  }
  entity.mig_mode = d.value("mig_mode", -1);
  entity.max_mig_devices = d.value("max_mig_devices", 7U);
  unsigned position = 0;
  for (const json& m : d.value("mig_instances", json::array())) {
    entity.mig_instances.push_back(parse_mig(m, index, position++));
  }
  if (d.contains("grow_processes")) {
    check_keys(d["grow_processes"], {"times", "by"}, "grow_processes");
    entity.grow_times = d["grow_processes"].value("times", 0U);
    entity.grow_by = d["grow_processes"].value("by", 0U);
  }
  return entity;
}

struct Counter {
  std::string name;
  unsigned long long value = 0;
};

/// A deque keeps references stable while counters are added.
std::deque<Counter>& counters() {
  static std::deque<Counter> all;
  return all;
}

}  // namespace

void Entity::grow() {
  if (grow_times == 0) return;
  --grow_times;
  for (unsigned i = 0; i < grow_by; ++i) {
    processes.push_back({90'000'000U + index * 100'000U + grown++, 1ULL << 20U, KindCompute,
                         0xFFFFFFFFU, 0xFFFFFFFFU});
  }
}

bool State::load_from_env() {
  const char* path = std::getenv("VRAMSCOPE_NVML_DOUBLE_SCRIPT");
  if (path == nullptr || path[0] == '\0') {
    std::fprintf(stderr,
                 "vramscope_nvml_double: set VRAMSCOPE_NVML_DOUBLE_SCRIPT to a script file\n");
    return false;
  }
  try {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open the file");
    const json script = json::parse(in);
    check_keys(script, {"driver_version", "init", "count", "devices"}, "the script");
    State fresh;
    fresh.init_depth = init_depth;
    fresh.driver_version = script.value("driver_version", fresh.driver_version);
    if (script.contains("init")) fresh.init_result = parse_code(script["init"]);
    if (script.contains("count")) fresh.count_result = parse_code(script["count"]);
    unsigned index = 0;
    for (const json& d : script.value("devices", json::array()))
      fresh.devices.push_back(parse_device(d, index++));
    *this = std::move(fresh);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vramscope_nvml_double: %s: %s\n", path, e.what());
    return false;
  }
}

void* State::handle_of(unsigned device, int mig_position) {
  const auto value =
      (static_cast<uintptr_t>(device) + 1U) << 8U | static_cast<uintptr_t>(mig_position + 1);
  return reinterpret_cast<void*>(value);
}

Entity* State::entity_of(void* handle) {
  const auto value = reinterpret_cast<uintptr_t>(handle);
  const uintptr_t device = (value >> 8U) - 1U;
  const uintptr_t mig = value & 0xFFU;
  if (value < 0x100U || device >= devices.size()) return nullptr;
  Entity& gpu = devices[device];
  if (mig == 0) return &gpu;
  // A MIG handle goes stale when its GPU leaves MIG mode, as on the real driver.
  if (gpu.mig_mode != 1 || mig - 1 >= gpu.mig_instances.size()) return nullptr;
  return &gpu.mig_instances[mig - 1];
}

int State::mig_position(const Entity& parent, unsigned slot) {
  for (std::size_t i = 0; i < parent.mig_instances.size(); ++i) {
    if (parent.mig_instances[i].slot == slot) return static_cast<int>(i);
  }
  return -1;
}

State& state() {
  static State the_state;
  return the_state;
}

const char* error_string(int code) {
  switch (code) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 6:
      return "Not Found";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case 13:
      return "Function Not Found";
    case 15:
      return "GPU is lost";
    case 17:
      return "Operating System Error";
    case 18:
      return "RM has detected an NVML/RM version mismatch.";
    case 25:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

unsigned long long& call_counter(const char* name) {
  for (Counter& counter : counters()) {
    if (counter.name == name) return counter.value;
  }
  counters().push_back({name, 0});
  return counters().back().value;
}

unsigned long long calls_of(const char* name) {
  for (const Counter& counter : counters()) {
    if (counter.name == name) return counter.value;
  }
  return 0;
}

void reset_calls() {
  for (Counter& counter : counters()) counter.value = 0;
}

}  // namespace vramscope_double
