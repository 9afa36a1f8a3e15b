// tests/cpp/format/v1_small_fixture.hpp -- FROZEN: what tests/data/recordings/v1_small.vsrec holds
//
// Never edit these values: the checked-in file was generated from them (make_v1_small, see
// docs/recording-format.md) and every later vramscope must still read it back to exactly this.
#pragma once

#include <vector>

#include "vramscope/format/recording.hpp"
#include "vramscope/sample.hpp"

namespace vramscope::testing {

inline RecordingMetadata v1_small_metadata() {
  RecordingMetadata m;
  m.created_ns = 1'714'000'000'000'000'000;
  m.interval_ns = 500'000'000;
  m.hostname = "gpu-box";
  m.driver_version = "550.54.15";
  m.command = "python train.py --epochs 3";
  m.writer_version = "0.1.0";
  return m;
}

inline DeviceSample v1_small_device(uint32_t index, uint64_t used_bytes) {
  DeviceSample d;
  d.index = index;
  d.name = "NVIDIA A100-SXM4-40GB";
  d.uuid = "GPU-" + std::to_string(index) + "f0e1d2c-3b4a-5968-7a8b-9c0d1e2f3a4b";
  d.pci_bus_id = "00000000:0" + std::to_string(index + 7) + ":00.0";
  d.total_bytes = 42'949'672'960ULL;
  d.reserved_bytes = 520'093'696ULL;
  d.used_bytes = used_bytes;
  d.free_bytes = *d.total_bytes - *d.reserved_bytes - used_bytes;
  d.memory_v2 = true;
  d.bar1_total_bytes = 68'719'476'736ULL;
  d.bar1_used_bytes = 4'194'304ULL;
  d.mig_enabled = false;
  d.processes_supported = true;
  ProcessSample p;
  p.pid = 31337;
  p.used_bytes = used_bytes - 600'000'000ULL;
  p.kinds = ProcessKindCompute;
  p.visible = true;
  p.user = "alice";
  p.command = "python train.py --epochs 3 --note=héllo-世界";
  d.processes.push_back(p);
  ProcessSample hidden;
  hidden.pid = 999;
  hidden.kinds = ProcessKindCompute | ProcessKindGraphics;
  d.processes.push_back(hidden);
  return d;
}

/// The samples, grouped by the chunk they were flushed in.
inline std::vector<std::vector<SystemSample>> v1_small_chunks() {
  std::vector<std::vector<SystemSample>> chunks(3);
  int64_t ts = 1'714'000'000'100'000'000;
  const auto base = [&ts](uint64_t used_bytes) {
    SystemSample s;
    s.timestamp_ns = ts;
    ts += 500'000'000;
    s.hostname = "gpu-box";
    s.driver_version = "550.54.15";
    s.devices.push_back(v1_small_device(0, used_bytes));
    return s;
  };
  // Chunk 1: driver view only, then one with fields unsupported.
  chunks[0].push_back(base(2'000'000'000ULL));
  SystemSample sparse = base(2'100'000'000ULL);
  sparse.devices[0].reserved_bytes.reset();
  sparse.devices[0].free_bytes.reset();
  sparse.devices[0].bar1_total_bytes.reset();
  sparse.devices[0].bar1_used_bytes.reset();
  sparse.devices[0].mig_enabled.reset();
  sparse.devices[0].memory_v2 = false;
  sparse.devices[0].processes[0].used_bytes.reset();
  sparse.devices[0].error = "bar1: not supported";
  chunks[0].push_back(sparse);

  // Chunk 2: a MIG GPU, an agent, a finished step and an OOM.
  SystemSample rich = base(30'000'000'000ULL);
  DeviceSample mig = v1_small_device(1, 5'000'000'000ULL);
  mig.mig_enabled = true;
  MigInstanceSample instance;
  instance.index = 0;
  instance.uuid = "MIG-11112222-3333-4444-5555-666677778888";
  instance.gpu_instance_id = 1;
  instance.compute_instance_id = 0;
  instance.total_bytes = 10'200'547'328ULL;
  instance.used_bytes = 5'000'000'000ULL;
  instance.free_bytes = 5'200'547'328ULL;
  mig.mig_instances.push_back(instance);
  mig.processes[0].gpu_instance_id = 1;
  mig.processes[0].compute_instance_id = 0;
  rich.devices.push_back(mig);
  AllocatorSample agent;
  agent.pid = 31337;
  agent.rank = 0;
  agent.world_size = 2;
  agent.cuda_device = 0;
  agent.device_uuid = rich.devices[0].uuid;
  agent.allocated_bytes = 25'000'000'000ULL;
  agent.reserved_bytes = 28'000'000'000ULL;
  agent.requested_bytes = 24'900'000'000ULL;
  agent.active_bytes = 25'100'000'000ULL;
  agent.inactive_split_bytes = 12'582'912ULL;
  agent.peak_allocated_bytes = 27'000'000'000ULL;
  agent.peak_reserved_bytes = 28'000'000'000ULL;
  agent.step = 12;
  agent.step_peak_allocated_bytes = 26'500'000'000ULL;
  agent.step_peak_reserved_bytes = 28'000'000'000ULL;
  agent.oom_count = 1;
  agent.event_count = 123'456;
  agent.dropped_event_count = 7;
  agent.updated_ns = rich.timestamp_ns - 2'000'000;
  rich.allocators.push_back(agent);
  StepRecord step;
  step.pid = 31337;
  step.rank = 0;
  step.cuda_device = 0;
  step.device_uuid = agent.device_uuid;
  step.step = 12;
  step.end_ns = rich.timestamp_ns - 40'000'000;
  step.duration_ns = 812'000'000;
  step.peak_allocated_bytes = 26'500'000'000ULL;
  step.peak_reserved_bytes = 28'000'000'000ULL;
  step.peak_requested_bytes = 26'400'000'000ULL;
  step.allocated_bytes = 25'000'000'000ULL;
  step.reserved_bytes = 28'000'000'000ULL;
  rich.steps.push_back(step);
  OomRecord oom;
  oom.pid = 31337;
  oom.rank = 0;
  oom.cuda_device = 0;
  oom.device_uuid = agent.device_uuid;
  oom.timestamp_ns = rich.timestamp_ns - 100'000'000;
  oom.requested_bytes = 8'589'934'592ULL;
  oom.device_total_bytes = 42'949'672'960ULL;
  oom.device_free_bytes = 1'073'741'824ULL;
  oom.allocated_bytes = 26'000'000'000ULL;
  oom.reserved_bytes = 28'000'000'000ULL;
  rich.ooms.push_back(oom);
  chunks[1].push_back(rich);

  // Chunk 3: the agent gone, the GPU lost.
  chunks[2].push_back(base(2'000'000'000ULL));
  SystemSample lost = base(0);
  lost.devices[0] = DeviceSample{};
  lost.devices[0].uuid = chunks[2][0].devices[0].uuid;
  lost.devices[0].lost = true;
  lost.devices[0].error = "GPU has fallen off the bus";
  chunks[2].push_back(lost);
  return chunks;
}

}  // namespace vramscope::testing
