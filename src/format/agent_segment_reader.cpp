// src/format/agent_segment_reader.cpp -- finding, validating and reading agents' segments
//
// Every file in the directory is treated as hostile until proven otherwise: it must be a
// regular file (never a symlink) owned by us, carry our magic and version, and have exactly the
// size its header declares, with every count inside fixed bounds. Only then is it mapped,
// read-only. Copies are taken with the seqlock protocol, so a reader never blocks a writer.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <variant>

#include "vramscope/agent_segment.hpp"
#include "vramscope/clock.hpp"
#include "vramscope/core/plausible.hpp"
#include "vramscope/format/agent_segment_layout.hpp"
#include "vramscope/format/agent_segments.hpp"
#include "vramscope/format/process_identity.hpp"
#include "vramscope/format/segment_dir.hpp"

namespace vramscope {
namespace {

using namespace format;

/// A writer in another pid namespace cannot be checked by pid; without a heartbeat for this
/// long its segment is no longer reported (but left in place: it may still be alive). A
/// heartbeat this far in the future is no heartbeat either: it would never age.
constexpr int64_t foreign_writer_stale_ns = 60'000'000'000;

// A slot, step or OOM claiming more than max_plausible_bytes (core/plausible.hpp: 1 PiB) is
// damaged or forged and is skipped; the bound also keeps every sum over 256 slots far from
// overflowing.
/// Ranks and world sizes above this are not a job anyone runs (-1 means "not distributed").
constexpr int32_t max_plausible_rank = 1 << 20;

// A poll lists the directory again only when it changed since the last listing (its mtime or
// ctime moved, or it was removed), when that listing came sooner than agent_dir_settle_ns
// after the directory's last change (a change in the same tick leaves the same mtime), when a file
// named as a segment was not mapped there (a writer still filling its header), or after
// dir_relist_ns. Otherwise it reads the segments it knows, each checked with one fstatat (a
// shrunk file is never read through its old mapping) and its writer with one poll() of a
// pidfd: 2 system calls a segment and one for the directory, where a listing takes 8 and a
// liveness check 5 (`vramscope record -i 1ms` on the 2-core development VM: 36-40 us of CPU a
// sample with an empty directory listed at every poll, 26-30 us now, as without a directory).
/// The longest a known set of segments is read without a listing (the directory replaced
/// under its name is seen within it).
constexpr int64_t dir_relist_ns = 1'000'000'000;
/// Writers watched through a pidfd at most (each one file descriptor); the others are checked
/// through /proc on every poll.
constexpr std::size_t max_pidfds = 64;

int64_t timespec_ns(const struct timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

/// A pidfd of `pid` (Linux 5.3; -1 where the kernel has none or refuses).
int open_pidfd(uint32_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0U));
#else
  (void)pid;
  return -1;
#endif
}

/// One mapped, validated segment and what this reader already returned from it.
struct MappedSegment {
  std::string name;
  const std::byte* map = nullptr;
  /// Bytes mapped: the file's size when it was validated. A file that no longer has this size
  /// is never read through the old mapping (pages past a shrunk end raise SIGBUS).
  uint64_t size_bytes = 0;
  SegmentHeader header{};
  SegmentGeometry geometry;
  uint64_t steps_returned = 0;
  uint64_t ooms_returned = 0;
  /// The note's `seq` when it was last copied (0: never), and what it said: copied again only
  /// when the writer has written it since.
  uint64_t note_seq = 0;
  std::string polling_reason;
  /// The writer's pidfd once it was found alive with its start time (-1: none): readable
  /// when that very process has ended, whoever holds its pid then.
  int pidfd = -1;

  MappedSegment() = default;
  MappedSegment(const MappedSegment&) = delete;
  MappedSegment& operator=(const MappedSegment&) = delete;
  ~MappedSegment() {
    if (map != nullptr) ::munmap(const_cast<std::byte*>(map), size_bytes);
    if (pidfd >= 0) ::close(pidfd);
  }
};

bool header_is_valid(const SegmentHeader& header, uint64_t file_size, uint32_t name_pid,
                     SegmentGeometry& geometry);

/// What a header check found.
enum class HeaderCheck {
  Valid,
  /// Our magic, a format version this build does not read: a vramscope of another release
  /// wrote it.
  OtherVersion,
  /// Anything else: not ours, damaged, or hostile. Skipped silently.
  Invalid,
};

/// Checks a header read from a file of `file_size` bytes; fills `geometry` when valid.
HeaderCheck check_header(const SegmentHeader& header, uint64_t file_size, uint32_t name_pid,
                         SegmentGeometry& geometry) {
  if (std::memcmp(header.magic, segment_magic, sizeof(segment_magic)) != 0) {
    return HeaderCheck::Invalid;
  }
  // Only after the magic and the version (at the same offsets in every version) is the rest of
  // the header known to mean what this build's struct says.
  if (header.version < segment_oldest_version || header.version > segment_version) {
    return HeaderCheck::OtherVersion;
  }
  return header_is_valid(header, file_size, name_pid, geometry) ? HeaderCheck::Valid
                                                                : HeaderCheck::Invalid;
}

/// The checks after magic and version (see check_header).
bool header_is_valid(const SegmentHeader& header, uint64_t file_size, uint32_t name_pid,
                     SegmentGeometry& geometry) {
  if (header.header_bytes < sizeof(SegmentHeader) || header.header_bytes % 8 != 0 ||
      header.header_bytes > 4096) {
    return false;
  }
  if (header.device_slots == 0 || header.device_slots > segment_max_device_slots) return false;
  if (header.slot_bytes != sizeof(SlotBlock) || header.step_entry_bytes != sizeof(StepEntry) ||
      header.oom_entry_bytes != sizeof(OomEntry)) {
    return false;
  }
  if (header.step_capacity == 0 || header.step_capacity > segment_max_ring_capacity ||
      header.oom_capacity == 0 || header.oom_capacity > segment_max_ring_capacity) {
    return false;
  }
  if (header.writer_pid != name_pid || header.writer_uid != ::geteuid()) return false;
  // Version 3 has no note: its word here was reserved, and zero.
  if (header.note_bytes != (header.version >= 4 ? sizeof(NoteBlock) : 0U)) return false;
  geometry = segment_geometry(header.header_bytes, header.note_bytes, header.device_slots,
                              header.step_capacity, header.oom_capacity);
  return geometry.total_bytes == header.total_bytes && geometry.total_bytes == file_size;
}

class SegmentReader final : public AgentSegmentReader {
 public:
  explicit SegmentReader(std::string dir)
      : m_dir(std::move(dir)), m_namespace_inode(pid_namespace_inode()), m_euid(::geteuid()) {}
  SegmentReader(const SegmentReader&) = delete;
  SegmentReader& operator=(const SegmentReader&) = delete;
  ~SegmentReader() override { forget_dir(); }

  void poll(std::vector<AllocatorSample>& allocators, std::vector<StepRecord>& new_steps,
            std::vector<OomRecord>& new_ooms) override {
    if (poll_known(allocators, new_steps, new_ooms)) return;
    poll_listing(allocators, new_steps, new_ooms);
  }

  std::vector<std::string> take_warnings() override { return std::exchange(m_warnings, {}); }

  uint64_t lost_step_count() const override { return m_lost_steps; }
  uint64_t lost_oom_count() const override { return m_lost_ooms; }

 private:
  using Key = std::pair<dev_t, ino_t>;

  void forget_dir() {
    if (m_dir_fd >= 0) ::close(m_dir_fd);
    m_dir_fd = -1;
  }

  /// Reads the segments of the last listing without listing again, where nothing says the
  /// directory or any of them changed (see dir_relist_ns); false, having read nothing, where
  /// something may have: the caller lists.
  bool poll_known(std::vector<AllocatorSample>& allocators, std::vector<StepRecord>& new_steps,
                  std::vector<OomRecord>& new_ooms) {
    if (m_dir_fd < 0 || !m_listing_complete || monotonic_ns() - m_listed_ns >= dir_relist_ns) {
      return false;
    }
    struct stat dir {};
    if (::fstat(m_dir_fd, &dir) != 0 || dir.st_nlink == 0 ||
        timespec_ns(dir.st_mtim) != m_dir_mtime_ns || timespec_ns(dir.st_ctim) != m_dir_ctime_ns) {
      return false;
    }
    // Every segment checked before any is read: a fallback to the listing returns each once.
    for (const Key& key : m_order) {
      const MappedSegment& segment = *m_segments.at(key);
      struct stat info {};
      if (::fstatat(m_dir_fd, segment.name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(info.st_mode) || info.st_uid != m_euid || info.st_dev != key.first ||
          info.st_ino != key.second || static_cast<uint64_t>(info.st_size) != segment.size_bytes ||
          !writer_is_alive(segment)) {
        return false;
      }
    }
    for (const Key& key : m_order) {
      MappedSegment& segment = *m_segments.at(key);
      if (!writer_is_stale(segment)) read_segment(segment, allocators, new_steps, new_ooms);
    }
    return true;
  }

  void poll_listing(std::vector<AllocatorSample>& allocators, std::vector<StepRecord>& new_steps,
                    std::vector<OomRecord>& new_ooms) {
    forget_dir();
    m_order.clear();
    m_listing_complete = false;
    std::string error;
    bool missing = false;
    // A missing or unsafe directory means "no agents": never an error for the monitor. An
    // unsafe one is said once, though: it keeps every agent from publishing, and only the
    // user can choose another directory.
    const int dir_fd = open_segment_dir(m_dir, /*create=*/false, error, &missing);
    if (dir_fd < 0) {
      m_segments.clear();
      if (!missing && error != m_dir_warning) m_warnings.push_back("agent segments: " + error);
      m_dir_warning = missing ? std::string() : error;
      return;
    }
    m_dir_warning.clear();
    // The directory as it was before the listing: a change during it is seen by the next poll.
    struct stat dir {};
    const int64_t listed_wall_ns = wall_time_ns();
    m_listed_ns = monotonic_ns();
    const bool dir_known = ::fstat(dir_fd, &dir) == 0;
    m_dir_mtime_ns = timespec_ns(dir.st_mtim);
    m_dir_ctime_ns = timespec_ns(dir.st_ctim);
    bool complete = dir_known && listed_wall_ns - m_dir_mtime_ns >= agent_dir_settle_ns &&
                    listed_wall_ns - m_dir_ctime_ns >= agent_dir_settle_ns;
    std::map<Key, std::unique_ptr<MappedSegment>> seen;
    std::set<Key> refused;
    // Writers watched through a pidfd: those of the last listing (some may end in this one: a
    // bound from above), and each one this listing opens.
    auto watched = static_cast<std::size_t>(std::count_if(
        m_segments.begin(), m_segments.end(), [](const auto& s) { return s.second->pidfd >= 0; }));
    // The listing reads its own descriptor (fdopendir takes it); dir_fd stays for the *at()
    // calls and the polls after.
    const int list_fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* listing = list_fd < 0 ? nullptr : ::fdopendir(list_fd);
    if (listing == nullptr) {
      if (list_fd >= 0) ::close(list_fd);
      ::close(dir_fd);
      return;
    }
    while (const dirent* entry = ::readdir(listing)) {
      const std::optional<uint32_t> pid = parse_segment_file_name(entry->d_name);
      if (!pid) continue;
      // A name not kept nor refused (a file not ours, a writer still filling its header, a
      // dead writer's file) makes the listing incomplete: the next poll lists again.
      struct stat info {};
      if (::fstatat(dir_fd, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 ||
          !S_ISREG(info.st_mode) || info.st_uid != m_euid) {
        complete = false;
        continue;
      }
      const auto key = std::make_pair(info.st_dev, info.st_ino);
      if (seen.count(key) != 0) continue;  // a second name (a hard link) of a segment read
      std::unique_ptr<MappedSegment> segment;
      if (auto it = m_segments.find(key); it != m_segments.end()) {
        segment = std::move(it->second);
        m_segments.erase(it);
        // Someone truncated or grew the file since it was mapped: drop the mapping before
        // touching it, and validate the file afresh below.
        if (static_cast<uint64_t>(info.st_size) != segment->size_bytes) segment.reset();
      }
      if (!segment && m_refused.count(key) != 0) {
        // Another format version, already reported: not read again while the file stays.
        refused.insert(key);
        continue;
      }
      if (!segment) {
        bool other_version = false;
        segment = map_segment(dir_fd, entry->d_name, *pid, other_version);
        if (other_version) refused.insert(key);
        if (!segment) {
          complete = complete && other_version;
          continue;
        }
      }
      if (!writer_is_alive(*segment)) {
        remove_if_same(dir_fd, *segment, key);
        complete = false;
        continue;
      }
      if (segment->pidfd < 0 && same_namespace(segment->header)) watch_writer(*segment, watched);
      m_order.push_back(key);
      if (!writer_is_stale(*segment)) read_segment(*segment, allocators, new_steps, new_ooms);
      seen.emplace(key, std::move(segment));
    }
    ::closedir(listing);
    // Segments no longer in the directory are unmapped here.
    m_segments = std::move(seen);
    m_refused = std::move(refused);
    m_dir_fd = dir_fd;
    m_listing_complete = complete;
  }

  /// Opens a pidfd of the segment's writer, found alive: kept where its start time still
  /// matches once it is open (the pid was not reused in between), while `watched` (counted on)
  /// is below max_pidfds.
  void watch_writer(MappedSegment& segment, std::size_t& watched) const {
    if (watched >= max_pidfds) return;
    const int fd = open_pidfd(segment.header.writer_pid);
    if (fd < 0) return;
    if (!process_is_alive(segment.header.writer_pid, segment.header.writer_start_ticks)) {
      ::close(fd);
      return;
    }
    segment.pidfd = fd;
    ++watched;
  }

  /// Maps a valid segment; null otherwise. A file of another format version sets
  /// `other_version` and queues a warning for take_warnings().
  std::unique_ptr<MappedSegment> map_segment(int dir_fd, const char* name, uint32_t pid,
                                             bool& other_version) {
    // O_NONBLOCK: a FIFO swapped in after the fstatat() must not hang us; fstat() re-checks.
    const int fd = ::openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return nullptr;
    auto segment = std::make_unique<MappedSegment>();
    struct stat info {};
    bool ok = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_uid == m_euid &&
              static_cast<uint64_t>(info.st_size) >= sizeof(SegmentHeader) &&
              ::pread(fd, &segment->header, sizeof(SegmentHeader), 0) ==
                  static_cast<ssize_t>(sizeof(SegmentHeader));
    if (ok) {
      const HeaderCheck check = check_header(segment->header, static_cast<uint64_t>(info.st_size),
                                             pid, segment->geometry);
      ok = check == HeaderCheck::Valid;
      if (check == HeaderCheck::OtherVersion) {
        other_version = true;
        m_warnings.push_back("agent segment " + std::string(name) + " (pid " + std::to_string(pid) +
                             ") has format v" + std::to_string(segment->header.version) +
                             "; this vramscope reads v" + std::to_string(segment_oldest_version) +
                             " to v" + std::to_string(segment_version) +
                             ": that process runs another vramscope version, its memory is not "
                             "shown (use the vramscope CLI of the same version)");
      }
    }
    if (ok) {
      void* map = ::mmap(nullptr, segment->geometry.total_bytes, PROT_READ, MAP_SHARED, fd, 0);
      ok = map != MAP_FAILED;
      if (ok) {
        segment->map = static_cast<const std::byte*>(map);
        segment->size_bytes = segment->geometry.total_bytes;
      }
    }
    ::close(fd);
    if (!ok) return nullptr;
    segment->name = name;
    // Whatever the ring still holds when a reader first looks is history, returned by the first
    // poll; records overwritten before that are not this reader's loss.
    const auto* live = reinterpret_cast<const SegmentHeader*>(segment->map);
    const uint64_t steps = load_word(&live->steps_written);
    const uint64_t ooms = load_word(&live->ooms_written);
    segment->steps_returned =
        steps > segment->header.step_capacity ? steps - segment->header.step_capacity : 0;
    segment->ooms_returned =
        ooms > segment->header.oom_capacity ? ooms - segment->header.oom_capacity : 0;
    return segment;
  }

  bool same_namespace(const SegmentHeader& header) const {
    return header.pid_namespace_inode == 0 || m_namespace_inode == 0 ||
           header.pid_namespace_inode == m_namespace_inode;
  }

  bool writer_is_alive(const MappedSegment& segment) const {
    // Pids from another namespace mean nothing here; such segments are judged by heartbeat.
    if (!same_namespace(segment.header)) return true;
    if (segment.pidfd >= 0) {
      struct pollfd ended {};
      ended.fd = segment.pidfd;
      ended.events = POLLIN;
      const int ready = ::poll(&ended, 1, 0);
      if (ready == 0) return true;
      if (ready > 0) return false;
    }
    return process_is_alive(segment.header.writer_pid, segment.header.writer_start_ticks);
  }

  bool writer_is_stale(const MappedSegment& segment) const {
    if (same_namespace(segment.header)) return false;
    const auto* header = reinterpret_cast<const SegmentHeader*>(segment.map);
    const auto heartbeat_ns =
        static_cast<int64_t>(load_word(reinterpret_cast<const uint64_t*>(&header->heartbeat_ns)));
    return heartbeat_is_stale(heartbeat_ns, wall_time_ns());
  }

  /// Is a heartbeat more than the stale window away from `now_ns`, in either direction? The
  /// distance is taken in unsigned arithmetic: any int64 pair is a valid input.
  static bool heartbeat_is_stale(int64_t heartbeat_ns, int64_t now_ns) {
    const auto now = static_cast<uint64_t>(now_ns);
    const auto beat = static_cast<uint64_t>(heartbeat_ns);
    const uint64_t distance = heartbeat_ns <= now_ns ? now - beat : beat - now;
    return distance > static_cast<uint64_t>(foreign_writer_stale_ns);
  }

  /// Unlinks a dead writer's file unless its name now points at a different file.
  static void remove_if_same(int dir_fd, const MappedSegment& segment,
                             const std::pair<dev_t, ino_t>& key) {
    struct stat info {};
    if (::fstatat(dir_fd, segment.name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0 &&
        info.st_dev == key.first && info.st_ino == key.second) {
      ::unlinkat(dir_fd, segment.name.c_str(), 0);
    }
  }

  void read_segment(MappedSegment& segment, std::vector<AllocatorSample>& allocators,
                    std::vector<StepRecord>& new_steps, std::vector<OomRecord>& new_ooms) {
    const SegmentHeader& header = segment.header;
    const auto* slots =
        reinterpret_cast<const SlotBlock*>(segment.map + segment.geometry.slots_offset);
    const std::size_t first = allocators.size();
    bool polled = false;
    for (uint32_t slot = 0; slot < header.device_slots; ++slot) {
      SlotStats stats{};
      if (!seqlock_read(slots + slot, stats) || !is_plausible(stats)) continue;
      allocators.push_back(to_sample(header.writer_pid, stats));
      polled = polled || allocators.back().polling_only;
    }
    // The process's reason goes to each of its polled slots (a reason without polling says
    // nothing about the numbers shown).
    if (polled && segment.geometry.has_note) {
      read_note(segment);
      for (std::size_t i = first; i < allocators.size(); ++i) {
        if (allocators[i].polling_only) allocators[i].polling_reason = segment.polling_reason;
      }
    }
    const auto* live = reinterpret_cast<const SegmentHeader*>(segment.map);
    read_records(segment, segment.geometry.steps_offset, header.step_capacity, live->steps_written,
                 segment.steps_returned, m_lost_steps, new_steps);
    read_records(segment, segment.geometry.ooms_offset, header.oom_capacity, live->ooms_written,
                 segment.ooms_returned, m_lost_ooms, new_ooms);
  }

  /// Copies the segment's note into `segment.polling_reason` when the writer wrote it since the
  /// last copy; a copy that keeps overlapping a write keeps the previous text for this poll.
  static void read_note(MappedSegment& segment) {
    const auto* block =
        reinterpret_cast<const NoteBlock*>(segment.map + segment.geometry.note_offset);
    const uint64_t seq = load_word(&block->seq);
    if (seq == segment.note_seq) return;
    SegmentNote note{};
    if (!seqlock_read(block, note)) return;
    // Bounded by the field: the writer's NUL is not trusted to be there.
    segment.polling_reason.assign(note.polling_reason, fixed_string_length(note.polling_reason));
    segment.note_seq = seq;
  }

  /// Appends the plausible records of one ring that this reader has not returned yet.
  template <typename Record>
  static void read_records(const MappedSegment& segment, uint64_t offset, uint32_t capacity,
                           const uint64_t& written, uint64_t& returned, uint64_t& lost,
                           std::vector<Record>& out) {
    using Payload = decltype(payload_of(Record{}));
    const auto* entries = reinterpret_cast<const SeqBlock<Payload>*>(segment.map + offset);
    read_ring(entries, capacity, load_word(&written), returned, lost, [&](const Payload& entry) {
      if (is_plausible(entry)) out.push_back(to_record(segment.header.writer_pid, entry));
    });
  }

  // The checks below keep a damaged or forged record out of every view: numbers no allocator
  // can hold would otherwise be printed as they are and summed into device totals.

  static bool bytes_are_plausible(const uint64_t* begin, const uint64_t* end) {
    return std::all_of(begin, end, [](uint64_t bytes) { return bytes <= max_plausible_bytes; });
  }

  static bool placement_is_plausible(int32_t rank, int32_t cuda_device) {
    return rank >= -1 && rank <= max_plausible_rank && cuda_device >= 0 &&
           cuda_device < static_cast<int32_t>(segment_max_device_slots);
  }

  static bool is_plausible(const SlotStats& s) {
    if (!placement_is_plausible(s.rank, s.cuda_device) || s.world_size < -1 ||
        s.world_size > max_plausible_rank) {
      return false;
    }
    for (std::size_t i = 0; i < allocator_counter_count; ++i) {
      if (allocator_counters[i].unit == CounterUnit::Bytes && s.counters[i] > max_plausible_bytes) {
        return false;
      }
    }
    if ((s.flags & ~slot_flags_known) != 0) return false;
    // A breakdown's parts are bytes on one device; flags for parts without a breakdown are
    // a damaged slot.
    if ((s.flags & slot_flag_breakdown) == 0) return (s.flags & ~slot_flag_polling_only) == 0;
    // Its parts as a recording's reader checks them (the device's total is not in the segment).
    return s.breakdown_paired_ns >= 0 &&
           bytes_are_plausible(std::begin(s.breakdown_bytes), std::end(s.breakdown_bytes)) &&
           implausible_bytes("", breakdown_of(s)).empty();
  }

  static bool is_plausible(const StepPayload& e) {
    if (!placement_is_plausible(e.rank, e.cuda_device) || e.duration_ns < 0 ||
        !bytes_are_plausible(std::begin(e.bytes), std::end(e.bytes))) {
      return false;
    }
    if (e.flags != step_flag_categories) return true;
    // Categories split one peak: none may exceed what any device holds.
    return bytes_are_plausible(std::begin(e.category_bytes), std::end(e.category_bytes));
  }

  static bool is_plausible(const OomPayload& e) {
    // The failed request itself may be absurd (that is why it failed); the device and the
    // allocator state may not.
    static_assert(oom_byte_fields[0].member == &OomRecord::requested_bytes);
    return placement_is_plausible(e.rank, e.cuda_device) &&
           bytes_are_plausible(std::begin(e.bytes) + 1, std::end(e.bytes));
  }

  /// Returns entries `returned+1 .. written` still present in the ring, oldest first.
  template <typename Payload, typename Emit>
  static void read_ring(const SeqBlock<Payload>* entries, uint32_t capacity, uint64_t written,
                        uint64_t& returned, uint64_t& lost, Emit emit) {
    if (written <= returned) return;
    const uint64_t oldest_kept = written > capacity ? written - capacity + 1 : 1;
    uint64_t sequence = returned + 1;
    if (sequence < oldest_kept) {
      lost = saturating_add(lost, oldest_kept - sequence);
      sequence = oldest_kept;
    }
    // At most `capacity` entries, counted down rather than compared with `written`: a counter
    // at 2^64-1 would make `sequence <= written` true forever once `sequence` wraps.
    for (uint64_t left = written - sequence + 1; left > 0; --left, ++sequence) {
      Payload payload{};
      // A failed read or a newer sequence number means the writer lapped us mid-read.
      if (seqlock_read(entries + (sequence - 1) % capacity, payload) &&
          payload.sequence == sequence) {
        emit(payload);
      } else {
        lost = saturating_add(lost, 1);
      }
    }
    returned = written;
  }

  static uint64_t saturating_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
  }

  /// A record with the fields every ring payload shares; the pid is the header's.
  template <typename Record, typename Payload>
  static Record placed(uint32_t pid, const Payload& entry) {
    Record record;
    record.pid = pid;
    record.rank = entry.rank;
    record.cuda_device = entry.cuda_device;
    record.device_uuid.assign(entry.device_uuid, fixed_string_length(entry.device_uuid));
    return record;
  }

  /// Copies a payload's array into the record's table fields (same order, see the layout).
  template <typename Field, std::size_t count, typename Record>
  static void copy_from_payload(const std::array<Field, count>& fields,
                                const uint64_t (&words)[count], Record& record) {
    for (std::size_t i = 0; i < count; ++i) record.*fields[i].member = words[i];
  }

  static AllocatorSample to_sample(uint32_t pid, const SlotStats& stats) {
    AllocatorSample sample = placed<AllocatorSample>(pid, stats);
    sample.world_size = stats.world_size;
    copy_from_payload(allocator_counters, stats.counters, sample);
    sample.polling_only = (stats.flags & slot_flag_polling_only) != 0;
    sample.updated_ns = stats.updated_ns;
    if ((stats.flags & slot_flag_breakdown) != 0) sample.breakdown = breakdown_of(stats);
    return sample;
  }

  /// The breakdown put_breakdown() stored in the slot.
  static DriverBreakdown breakdown_of(const SlotStats& stats) {
    DriverBreakdown b;
    std::size_t word = 0;
    uint32_t flag = slot_flag_first_part;
    for (const BreakdownField& field : breakdown_fields) {
      if (const auto* bytes = std::get_if<uint64_t DriverBreakdown::*>(&field.member)) {
        b.** bytes = stats.breakdown_bytes[word++];
      } else if (const auto* optional =
                     std::get_if<std::optional<uint64_t> DriverBreakdown::*>(&field.member)) {
        if ((stats.flags & flag) != 0) b.** optional = stats.breakdown_bytes[word];
        ++word;
        flag <<= 1U;
      }
    }
    b.paired_ns = stats.breakdown_paired_ns;
    b.nccl_version = stats.nccl_version;
    b.unsettled_count = stats.breakdown_unsettled;
    return b;
  }

  // Which payload a record is stored as (declared only, for read_records' decltype).
  static StepPayload payload_of(const StepRecord&);
  static OomPayload payload_of(const OomRecord&);

  static StepRecord to_record(uint32_t pid, const StepPayload& entry) {
    StepRecord step = placed<StepRecord>(pid, entry);
    step.step = entry.step;
    step.end_ns = entry.end_ns;
    step.duration_ns = entry.duration_ns;
    copy_from_payload(step_byte_fields, entry.bytes, step);
    // Unknown flag bits (a damaged entry) leave the categories out rather than guess.
    if (entry.flags == step_flag_categories) {
      CategoryBytes bytes{};
      for (std::size_t c = 0; c < segment_category_count; ++c) bytes[c] = entry.category_bytes[c];
      step.category_bytes = bytes;
    }
    return step;
  }

  static OomRecord to_record(uint32_t pid, const OomPayload& entry) {
    OomRecord oom = placed<OomRecord>(pid, entry);
    oom.timestamp_ns = entry.timestamp_ns;
    copy_from_payload(oom_byte_fields, entry.bytes, oom);
    return oom;
  }

  std::string m_dir;
  uint64_t m_namespace_inode;
  uid_t m_euid;
  std::map<Key, std::unique_ptr<MappedSegment>> m_segments;
  /// The directory of the last listing (-1: none kept), its mtime and ctime before it, when
  /// it was taken, and the segments kept, in the listing's order.
  int m_dir_fd = -1;
  int64_t m_dir_mtime_ns = 0;
  int64_t m_dir_ctime_ns = 0;
  int64_t m_listed_ns = 0;
  std::vector<Key> m_order;
  /// Did the last listing account for every file named as a segment, long enough after the
  /// directory's last change? Only then may a poll read without listing (poll_known).
  bool m_listing_complete = false;
  uint64_t m_lost_steps = 0;
  uint64_t m_lost_ooms = 0;
  /// Files of another format version seen in the last poll (each reported once).
  std::set<std::pair<dev_t, ino_t>> m_refused;
  std::vector<std::string> m_warnings;
  /// The unsafe-directory message last queued, so that it is said once, not on every poll.
  std::string m_dir_warning;
};

}  // namespace

std::unique_ptr<AgentSegmentReader> open_agent_segment_reader(const std::string& dir) {
  return std::make_unique<SegmentReader>(dir.empty() ? agent_segment_dir() : dir);
}

}  // namespace vramscope
