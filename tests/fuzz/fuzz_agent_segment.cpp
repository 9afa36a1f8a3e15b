// tests/fuzz/fuzz_agent_segment.cpp -- libFuzzer target: segment readers must survive any file
//
// Any process of the same user can write any bytes into a segment, or cut it short while it is
// mapped. The input becomes `agent-<our pid>.seg` in a private directory, polled by a reader,
// cut to a length the input chooses, and polled again: nothing may crash, hang, read past a
// mapping (SIGBUS) or hand on a number no allocator can hold, a driver breakdown whose parts
// cannot be, nor a polling reason longer than its field.
//
// Input: 2 bytes choosing where the file is cut before the second poll, then the file. The
// fields no mutation would guess (our pid and uid) are patched in, and a header whose counts are
// in range gets the length its geometry implies, so that the fuzzer explores the slots and
// rings rather than the size check at the door.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "vramscope/agent_segment.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/format/agent_segment_layout.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/format/process_identity.hpp"
#include "vramscope/format/segment_dir.hpp"

namespace {

using vramscope::format::SegmentHeader;

/// Longest file the harness makes (the real bound is about 27 MiB; this keeps runs fast).
constexpr uint64_t max_file_bytes = 1U << 20U;
/// The reader's bound on any byte count it passes on (agent_segment_reader.cpp).
constexpr uint64_t max_plausible_bytes = uint64_t{1} << 50U;

std::string private_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                        "/vramscope-fuzz-segment-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) __builtin_trap();
  return pattern;
}

void write_file(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) __builtin_trap();
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) __builtin_trap();
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

/// Makes the header refer to this process, and the file as long as the header says.
void patch(std::string& bytes) {
  if (bytes.size() < sizeof(SegmentHeader)) return;
  SegmentHeader header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  header.writer_pid = static_cast<uint32_t>(::getpid());
  header.writer_uid = ::geteuid();
  header.writer_start_ticks = 0;  // "unknown": the writer (us) is alive
  // Bit 0 of created_ns (which no reader checks) picks a foreign pid namespace (judged by
  // heartbeat) or ours.
  if ((header.created_ns & 1) == 0) header.pid_namespace_inode = 0;
  // A note of either size a version may have (none in version 3) keeps the geometry; any other
  // is refused at the door, as it should be.
  const bool note_known =
      header.note_bytes == 0 || header.note_bytes == sizeof(vramscope::format::NoteBlock);
  if (header.header_bytes >= sizeof(SegmentHeader) && header.header_bytes <= 4096 &&
      header.header_bytes % 8 == 0 && note_known && header.device_slots <= 256 &&
      header.step_capacity <= (1U << 16U) && header.oom_capacity <= (1U << 16U)) {
    const auto geometry = vramscope::format::segment_geometry(
        header.header_bytes, header.note_bytes, header.device_slots, header.step_capacity,
        header.oom_capacity);
    if (geometry.total_bytes <= max_file_bytes) {
      header.total_bytes = geometry.total_bytes;
      bytes.resize(geometry.total_bytes, '\0');
    }
  }
  std::memcpy(bytes.data(), &header, sizeof header);
}

void check(const std::vector<vramscope::AllocatorSample>& allocators,
           const std::vector<vramscope::StepRecord>& steps,
           const std::vector<vramscope::OomRecord>& ooms) {
  if (allocators.size() > 256 || steps.size() > (1U << 16U) || ooms.size() > (1U << 16U)) {
    __builtin_trap();
  }
  for (const auto& a : allocators) {
    if (a.allocated_bytes > max_plausible_bytes || a.reserved_bytes > max_plausible_bytes ||
        a.cuda_device < 0 || a.cuda_device >= 256 || a.rank < -1) {
      __builtin_trap();
    }
    // A driver breakdown handed on is one that could be: its parts within the reading.
    if (a.breakdown && !vramscope::implausible_bytes("", *a.breakdown).empty()) __builtin_trap();
    // A polling reason is bounded by its field, and only on a polled slot.
    if (a.polling_reason.size() > vramscope::format::segment_reason_bytes ||
        (!a.polling_only && !a.polling_reason.empty())) {
      __builtin_trap();
    }
  }
  for (const auto& s : steps) {
    if (s.peak_reserved_bytes > max_plausible_bytes || s.duration_ns < 0) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = private_dir();
  static const std::string path =
      dir + "/" + vramscope::format::segment_file_name(static_cast<uint32_t>(::getpid()));
  if (size < 2) return 0;
  const uint16_t cut = static_cast<uint16_t>(data[0] | (data[1] << 8U));
  std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  patch(bytes);
  write_file(path, bytes);

  auto reader = vramscope::open_agent_segment_reader(dir);
  std::vector<vramscope::AllocatorSample> allocators;
  std::vector<vramscope::StepRecord> steps;
  std::vector<vramscope::OomRecord> ooms;
  reader->poll(allocators, steps, ooms);
  check(allocators, steps, ooms);
  // Cut the mapped file short (as `truncate` from another process would), then read again.
  if (::truncate(path.c_str(), static_cast<off_t>(cut % (bytes.size() + 1))) != 0) __builtin_trap();
  allocators.clear();
  steps.clear();
  ooms.clear();
  reader->poll(allocators, steps, ooms);
  check(allocators, steps, ooms);
  static_cast<void>(reader->take_warnings());
  ::unlink(path.c_str());
  return 0;
}
