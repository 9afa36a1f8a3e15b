// src/format/agent_segment_writer.cpp -- creating and updating one process's agent segment
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <variant>

#include "vramscope/agent_segment.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/core/posix_io.hpp"
#include "vramscope/format/agent_segment_layout.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/format/process_identity.hpp"
#include "vramscope/format/segment_dir.hpp"
#include "vramscope/status.hpp"

namespace vramscope {
namespace {

using namespace format;

/// A ring payload with the fields every step and OOM record shares (the pid is the header's).
template <typename Payload, typename Record>
Payload placed_payload(const Record& record) {
  Payload entry{};
  entry.rank = record.rank;
  entry.cuda_device = record.cuda_device;
  copy_fixed_string(entry.device_uuid, record.device_uuid.data(), record.device_uuid.size());
  return entry;
}

/// Copies a record's table fields into a payload's array (same order, see the layout).
template <typename Field, std::size_t count, typename Record>
void copy_to_payload(const std::array<Field, count>& fields, const Record& record,
                     uint64_t (&words)[count]) {
  for (std::size_t i = 0; i < count; ++i) words[i] = record.*fields[i].member;
}

/// Appends `entry` to a ring as record number ++written (1-based), then publishes that number
/// in the header: a reader that sees the count sees the complete entry.
template <typename Payload>
void push(SeqBlock<Payload>* ring, uint32_t capacity, uint64_t* published, uint64_t& written,
          Payload entry) {
  entry.sequence = ++written;
  seqlock_write(ring + (entry.sequence - 1) % capacity, entry);
  store_word(published, entry.sequence);
}

class SegmentWriter final : public AgentSegmentWriter {
 public:
  SegmentWriter(int dir_fd, int fd, void* map, const SegmentGeometry& geometry,
                const std::string& dir, std::string name)
      : m_dir_fd(dir_fd),
        m_fd(fd),
        m_map(static_cast<std::byte*>(map)),
        m_geometry(geometry),
        m_name(std::move(name)),
        m_path(dir + "/" + m_name),
        m_creator_pid(::getpid()) {
    struct stat info {};
    if (::fstat(m_fd, &info) == 0) {
      m_inode = info.st_ino;
      m_device = info.st_dev;
    }
  }

  ~SegmentWriter() override {
    // Only the creating process removes the file: a fork()ed child (a DataLoader worker) that
    // runs static destructors must not delete its parent's segment. And only if the name still
    // points at our file: a later writer for the same pid may have replaced it.
    if (::getpid() == m_creator_pid) {
      struct stat info {};
      if (::fstatat(m_dir_fd, m_name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
          info.st_ino == m_inode && info.st_dev == m_device) {
        ::unlinkat(m_dir_fd, m_name.c_str(), 0);
      }
    }
    ::munmap(m_map, m_geometry.total_bytes);
    ::close(m_fd);
    ::close(m_dir_fd);
  }

  void publish(uint32_t slot, const AllocatorSample& sample) override {
    if (slot >= header()->device_slots) {
      throw Error("agent segment: device slot " + std::to_string(slot) + " out of range");
    }
    SlotStats stats{};
    stats.rank = sample.rank;
    stats.world_size = sample.world_size;
    stats.cuda_device = sample.cuda_device;
    stats.flags = sample.polling_only ? slot_flag_polling_only : 0U;
    copy_to_payload(allocator_counters, sample, stats.counters);
    stats.updated_ns = sample.updated_ns != 0 ? sample.updated_ns : wall_time_ns();
    copy_fixed_string(stats.device_uuid, sample.device_uuid.data(), sample.device_uuid.size());
    if (sample.breakdown) put_breakdown(*sample.breakdown, stats);
    seqlock_write(slots() + slot, stats);
    store_word(reinterpret_cast<uint64_t*>(&header()->heartbeat_ns),
               static_cast<uint64_t>(stats.updated_ns));
  }

  /// Stores a breakdown in the slot's version-3 words and flags: its byte fields in the words,
  /// the presence of each optional one as a flag, the time and the numbers in their own fields.
  static void put_breakdown(const DriverBreakdown& b, SlotStats& stats) {
    stats.flags |= slot_flag_breakdown;
    std::size_t word = 0;
    uint32_t flag = slot_flag_first_part;
    for (const BreakdownField& field : breakdown_fields) {
      if (const auto* bytes = std::get_if<uint64_t DriverBreakdown::*>(&field.member)) {
        stats.breakdown_bytes[word++] = b.**bytes;
      } else if (const auto* optional =
                     std::get_if<std::optional<uint64_t> DriverBreakdown::*>(&field.member)) {
        if (b.**optional) {
          stats.breakdown_bytes[word] = *(b.**optional);
          stats.flags |= flag;
        }
        ++word;
        flag <<= 1U;
      }
    }
    stats.breakdown_paired_ns = b.paired_ns;
    stats.nccl_version = b.nccl_version;
    stats.breakdown_unsettled = b.unsettled_count;
  }

  void push_step(const StepRecord& step) override {
    StepPayload entry = placed_payload<StepPayload>(step);
    entry.step = step.step;
    entry.end_ns = step.end_ns;
    entry.duration_ns = step.duration_ns;
    copy_to_payload(step_byte_fields, step, entry.bytes);
    if (step.category_bytes) {
      static_assert(segment_category_count == memory_category_count);
      entry.flags |= step_flag_categories;
      for (std::size_t c = 0; c < segment_category_count; ++c) {
        entry.category_bytes[c] = (*step.category_bytes)[c];
      }
    }
    push(steps(), header()->step_capacity, &header()->steps_written, m_steps_written, entry);
  }

  void push_oom(const OomRecord& oom) override {
    OomPayload entry = placed_payload<OomPayload>(oom);
    entry.timestamp_ns = oom.timestamp_ns;
    copy_to_payload(oom_byte_fields, oom, entry.bytes);
    push(ooms(), header()->oom_capacity, &header()->ooms_written, m_ooms_written, entry);
  }

  void set_polling_reason(std::string_view reason) override {
    SegmentNote note{};
    copy_fixed_string(note.polling_reason, reason.data(), reason.size());
    seqlock_write(reinterpret_cast<NoteBlock*>(m_map + m_geometry.note_offset), note);
  }

  const std::string& path() const override { return m_path; }

 private:
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(m_map); }
  SlotBlock* slots() const { return reinterpret_cast<SlotBlock*>(m_map + m_geometry.slots_offset); }
  StepEntry* steps() const { return reinterpret_cast<StepEntry*>(m_map + m_geometry.steps_offset); }
  OomEntry* ooms() const { return reinterpret_cast<OomEntry*>(m_map + m_geometry.ooms_offset); }

  int m_dir_fd;
  int m_fd;
  std::byte* m_map;
  SegmentGeometry m_geometry;
  std::string m_name;
  std::string m_path;
  pid_t m_creator_pid;
  ino_t m_inode = 0;
  dev_t m_device = 0;
  uint64_t m_steps_written = 0;
  uint64_t m_ooms_written = 0;
};

/// Creates an exclusive temporary file in the directory; returns its fd and sets `name`.
int create_temp_file(int dir_fd, uint32_t pid, std::string& name) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    name = ".agent-" + std::to_string(pid) + ".tmp" + std::to_string(::getpid()) + "-" +
           std::to_string(attempt);
    // O_EXCL | O_NOFOLLOW: never reuse or follow anything already under that name.
    const int fd =
        ::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

std::unique_ptr<AgentSegmentWriter> open_agent_segment_writer(uint32_t pid, uint32_t device_slots,
                                                              const std::string& dir) {
  if (device_slots == 0 || device_slots > segment_max_device_slots) {
    throw Error("agent segment: device slot count " + std::to_string(device_slots) +
                " outside 1.." + std::to_string(segment_max_device_slots));
  }
  const std::string directory = dir.empty() ? agent_segment_dir() : dir;
  std::string error;
  const int dir_fd = open_segment_dir(directory, /*create=*/true, error);
  if (dir_fd < 0) throw Error("agent segment: " + error);

  const SegmentGeometry geometry =
      segment_geometry(sizeof(SegmentHeader), sizeof(NoteBlock), device_slots,
                       segment_step_capacity, segment_oom_capacity);
  std::string temp_name;
  const int fd = create_temp_file(dir_fd, pid, temp_name);
  void* map = MAP_FAILED;
  const auto fail = [&](const std::string& what) {
    const std::string reason = what + ": " + errno_text(errno);
    if (map != MAP_FAILED) ::munmap(map, geometry.total_bytes);
    if (fd >= 0) {
      ::unlinkat(dir_fd, temp_name.c_str(), 0);
      ::close(fd);
    }
    ::close(dir_fd);
    throw Error("agent segment in " + directory + ": " + reason);
  };
  if (fd < 0) fail("cannot create a file");
  // The umask may have cleared bits but never adds any; fchmod makes the mode exact anyway.
  if (::fchmod(fd, 0600) != 0) fail("fchmod");
  if (::ftruncate(fd, static_cast<off_t>(geometry.total_bytes)) != 0) fail("ftruncate");
  map = ::mmap(nullptr, geometry.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) fail("mmap");

  // ftruncate zero-filled the file: every seqlock starts at 0 ("never written"), the note among
  // them, and both ring counters at 0. Only the header needs filling, before the file gets its
  // final name.
  auto* header = static_cast<SegmentHeader*>(map);
  std::memcpy(header->magic, segment_magic, sizeof(segment_magic));
  header->version = segment_version;
  header->header_bytes = sizeof(SegmentHeader);
  header->device_slots = device_slots;
  header->slot_bytes = sizeof(SlotBlock);
  header->step_entry_bytes = sizeof(StepEntry);
  header->oom_entry_bytes = sizeof(OomEntry);
  header->step_capacity = segment_step_capacity;
  header->oom_capacity = segment_oom_capacity;
  header->writer_pid = pid;
  header->writer_uid = ::geteuid();
  header->note_bytes = sizeof(NoteBlock);
  header->writer_start_ticks = process_start_ticks(pid).value_or(0);
  header->pid_namespace_inode = pid_namespace_inode();
  header->total_bytes = geometry.total_bytes;
  header->created_ns = wall_time_ns();
  header->heartbeat_ns = header->created_ns;

  // rename() is atomic: readers see either no file or a complete header, never a partial one.
  const std::string name = segment_file_name(pid);
  if (::renameat(dir_fd, temp_name.c_str(), dir_fd, name.c_str()) != 0) fail("rename");
  return std::make_unique<SegmentWriter>(dir_fd, fd, map, geometry, directory, name);
}

}  // namespace vramscope
