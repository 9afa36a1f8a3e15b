// tests/cpp/view/top_fake_agent.cpp -- a stand-in trainer for the `top` end-to-end test
//
// Publishes one agent segment for its own pid, as the PyTorch agent would, prints "ready" and
// waits until stdin closes; the segment is removed when it exits. The segment directory is
// $VRAMSCOPE_SHM_DIR like every other vramscope process.
//
// usage: top_fake_agent DEVICE_UUID ALLOCATED_BYTES RESERVED_BYTES [RANK]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "vramscope/agent_segment.hpp"
#include "vramscope/clock.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DEVICE_UUID ALLOCATED_BYTES RESERVED_BYTES [RANK]\n", argv[0]);
    return 2;
  }
  try {
    const auto pid = static_cast<uint32_t>(getpid());
    auto writer = vramscope::AgentSegmentWriter::create(pid, 1);
    vramscope::AllocatorSample sample;
    sample.pid = pid;
    sample.device_uuid = argv[1];
    sample.allocated_bytes = std::strtoull(argv[2], nullptr, 10);
    sample.reserved_bytes = std::strtoull(argv[3], nullptr, 10);
    sample.active_bytes = sample.allocated_bytes;
    sample.peak_allocated_bytes = sample.allocated_bytes;
    sample.peak_reserved_bytes = sample.reserved_bytes;
    sample.step = 42;
    sample.step_peak_allocated_bytes = sample.allocated_bytes + (1ULL << 30U);
    sample.rank = argc > 4 ? std::atoi(argv[4]) : -1;
    sample.world_size = sample.rank >= 0 ? sample.rank + 1 : -1;
    sample.updated_ns = vramscope::wall_time_ns();
    writer->publish(0, sample);
    std::printf("ready %u\n", pid);
    std::fflush(stdout);
    // Wait for the test to close our stdin; the writer's destructor removes the segment.
    char buffer[64];
    while (read(STDIN_FILENO, buffer, sizeof buffer) > 0) {
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "top_fake_agent: %s\n", e.what());
    return 1;
  }
}
