// tests/cpp/view/top_fake_agent.cpp -- a stand-in trainer for the `top` and export end-to-end tests
//
// Publishes one agent segment for its own pid, as the PyTorch agent would, prints "ready" and
// waits until stdin closes; the segment is removed when it exits. The segment directory is
// $VRAMSCOPE_SHM_DIR like every other vramscope process.
//
// usage: top_fake_agent DEVICE_UUID ALLOCATED_BYTES RESERVED_BYTES [RANK]
// With $VRAMSCOPE_FAKE_AGENT_STEP set it also closes step 42 with a category breakdown.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "vramscope/agent_segment.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/format/agent_segments.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DEVICE_UUID ALLOCATED_BYTES RESERVED_BYTES [RANK]\n", argv[0]);
    return 2;
  }
  try {
    const auto pid = static_cast<uint32_t>(getpid());
    auto writer = vramscope::open_agent_segment_writer(pid, 1);
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
    if (std::getenv("VRAMSCOPE_FAKE_AGENT_STEP") != nullptr) {
      // One closed step with a category breakdown (for the export tests): each category is a
      // fixed share of the step's requested peak, so a test can recompute them.
      vramscope::StepRecord step;
      step.pid = pid;
      step.rank = sample.rank;
      step.cuda_device = 0;
      step.device_uuid = sample.device_uuid;
      step.step = 42;
      step.end_ns = sample.updated_ns;
      step.duration_ns = 250'000'000;
      step.peak_requested_bytes = sample.allocated_bytes;
      step.peak_allocated_bytes = sample.allocated_bytes;
      step.peak_reserved_bytes = sample.reserved_bytes;
      step.allocated_bytes = sample.allocated_bytes / 2;
      step.reserved_bytes = sample.reserved_bytes;
      vramscope::CategoryBytes categories{};
      uint64_t left = step.peak_requested_bytes;
      for (std::size_t c = 0; c + 1 < categories.size(); ++c) {
        categories[c] = left / 2;  // 1/2, 1/4, 1/8, ... of the peak; "other" takes the rest
        left -= categories[c];
      }
      categories.back() = left;
      step.category_bytes = categories;
      writer->push_step(step);
    }
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
