// src/format/include/vramscope/format/agent_segment_layout.hpp -- byte layout of an agent's shared-memory segment
//
// One file per monitored process, `agent-<pid>.seg` in agent_segment_dir(), mapped MAP_SHARED by
// the writer (read-write) and by any number of readers (read-only). Everything is little-endian
// native, 8-byte aligned, fixed-size; docs/agent-segment.md is the prose specification.
//
//  offset 0                          header_bytes   + note_bytes
//  ┌─────────────────────────────────┬──────────────┬─────────────┬─────────────┬─────────────┐
//  │ SegmentHeader (128 B)           │ NoteBlock    │ SlotBlock × │ StepEntry × │ OomEntry ×  │
//  │ magic[8] "VRSCAGT1" version u16 │ (520 B, v4;  │ device_     │ step_capac. │ oom_capac.  │
//  │ …  note_bytes u32 at 44         │  none in v3) │ slots       │             │             │
//  └─────────────────────────────────┴──────────────┴─────────────┴─────────────┴─────────────┘
//
//  NoteBlock / SlotBlock / StepEntry / OomEntry:
//  ┌──────────────┬──────────────────────────────────────────────────────────────┐
//  │ seq u64      │ payload (SegmentNote / SlotStats / StepPayload / OomPayload) │
//  │ seqlock      │ copied word by word with relaxed atomics                     │
//  └──────────────┴──────────────────────────────────────────────────────────────┘
//
// Concurrency: the writer never waits for readers. Each block is a seqlock: the writer makes
// `seq` odd, stores the payload, then makes `seq` even with release ordering; a reader copies
// the payload between two acquire loads of `seq` and keeps the copy only when both are equal
// and even. Payload words are copied with relaxed atomic loads and stores so the protocol has
// no data race in the C++ memory model (and stays clean under ThreadSanitizer).
//
// The rings hold recent steps and OOMs. The writer fills entry `n % capacity` with sequence
// number `n` (1-based) and then publishes `n` in the header's `*_written` counter; a reader that
// remembers the last number it returned reports each record exactly once and counts the records
// that were overwritten before it could read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "vramscope/sample.hpp"

namespace vramscope::format {

/// "VRSCAGT1": identifies an agent segment (distinct from the recording file magic).
inline constexpr char segment_magic[8] = {'V', 'R', 'S', 'C', 'A', 'G', 'T', '1'};
/// Bumped on any layout change; readers refuse a version they do not read (and say so once).
/// Version 2 added the step flags and per-category bytes to StepPayload; version 3 the driver's
/// bytes part by part to SlotStats (DriverBreakdown); version 4 the note after the header (why
/// the process polls). The magic and the version stay at offsets 0 and 8 in every version, so a
/// reader can always tell which one it is facing.
inline constexpr uint16_t segment_version = 4;
/// The oldest version a reader still reads: version 3 is version 4 without the note (its
/// header's note_bytes, then reserved, is 0), so a trainer of the previous release stays shown.
inline constexpr uint16_t segment_oldest_version = 3;
/// Bytes reserved for a device UUID ("GPU-…" is 40 characters; MIG UUIDs are longer).
inline constexpr std::size_t segment_uuid_bytes = 96;
/// Bytes reserved for the polling reason (one line and its fix; a longer one is cut at a UTF-8
/// character boundary, NUL included).
inline constexpr std::size_t segment_reason_bytes = 512;
/// Bounds a reader accepts; a writer never creates more.
inline constexpr uint32_t segment_max_device_slots = 256;
inline constexpr uint32_t segment_max_ring_capacity = 1U << 16U;
/// Default ring capacities used by AgentSegmentWriter::create.
inline constexpr uint32_t segment_step_capacity = 256;
inline constexpr uint32_t segment_oom_capacity = 16;

/// SlotStats::flags bits: is the device polled only; is there a breakdown (version 3), and which
/// of its optional parts are known (bit slot_flag_first_part << i for the i-th optional part of
/// breakdown_fields: private pools, NCCL, other, first context)?
inline constexpr uint32_t slot_flag_polling_only = 1U << 0U;
inline constexpr uint32_t slot_flag_breakdown = 1U << 1U;
inline constexpr uint32_t slot_flag_first_part = 1U << 2U;
/// Every flag a version-3 writer sets; a reader refuses a slot with any other bit.
inline constexpr uint32_t slot_flags_known = (1U << 6U) - 1U;
/// Entries of SlotStats::breakdown_bytes: the byte fields of breakdown_fields (always measured
/// or optional), in that table's order: driver, reserved, private pools, NCCL, other, context,
/// first context, excess.
inline constexpr std::size_t breakdown_word_count =
    breakdown_field_count<uint64_t>() + breakdown_field_count<std::optional<uint64_t>>();
// A new byte part grows the slot, a new optional part takes a flag bit: bump segment_version.
static_assert(breakdown_word_count == 8 &&
                  slot_flags_known ==
                      (slot_flag_first_part << breakdown_field_count<std::optional<uint64_t>>()) -
                          1U,
              "a new DriverBreakdown part is a segment layout change");
/// StepPayload::flags bits: are category_bytes valid?
inline constexpr uint64_t step_flag_categories = 1U << 0U;
/// Categories in StepPayload::category_bytes (MemoryCategory order).
inline constexpr std::size_t segment_category_count = 6;

/// The fixed header at offset 0. Written once before the file gets its final name, except for
/// the atomically updated counters at the end.
struct SegmentHeader {
  char magic[8];
  uint16_t version;
  /// sizeof(SegmentHeader): lets a reader find the slots even if a later version grows it.
  uint16_t header_bytes;
  uint32_t device_slots;
  /// sizeof(SlotBlock), sizeof(StepEntry), sizeof(OomEntry) as the writer saw them.
  uint32_t slot_bytes;
  uint32_t step_entry_bytes;
  uint32_t oom_entry_bytes;
  uint32_t step_capacity;
  uint32_t oom_capacity;
  /// Pid of the writer in its own pid namespace, and its owner.
  uint32_t writer_pid;
  uint32_t writer_uid;
  /// sizeof(NoteBlock) (version 4); 0 in version 3, whose header had no note (a reserved word
  /// its writers left zero).
  uint32_t note_bytes;
  /// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot): detects pid reuse.
  uint64_t writer_start_ticks;
  /// Inode of /proc/self/ns/pid: pids are only comparable inside one pid namespace.
  uint64_t pid_namespace_inode;
  /// Size of the whole file; a reader requires the file to be exactly this long.
  uint64_t total_bytes;
  /// CLOCK_REALTIME ns when the segment was created.
  int64_t created_ns;
  /// CLOCK_REALTIME ns of the last publish (atomic; a heartbeat for readers in other namespaces).
  int64_t heartbeat_ns;
  /// Number of steps / OOMs ever pushed (atomic, release-stored after the entry is complete).
  uint64_t steps_written;
  uint64_t ooms_written;
  uint64_t reserved1[3];
};
static_assert(sizeof(SegmentHeader) == 128);
static_assert(offsetof(SegmentHeader, heartbeat_ns) % 8 == 0 &&
              offsetof(SegmentHeader, note_bytes) == 44);

/// What the process says of itself (version 4), once, not per device: why its allocator numbers
/// are polled. Written when the process learns it (the Python fallback at attach, the agent when
/// no tracker could be attached), rarely after, so a reader copies it again only when its `seq`
/// moved.
struct SegmentNote {
  /// Why the process polls, one line ending in its fix; NUL-terminated UTF-8 from another
  /// process (a reader bounds it by the field and never trusts it to be terminated or clean).
  /// Empty when the process does not poll. AllocatorSample::polling_reason of its polled slots.
  char polling_reason[segment_reason_bytes];
};
static_assert(sizeof(SegmentNote) == segment_reason_bytes);

/// Per-device statistics: the AllocatorSample fields except the pid (which is in the header).
struct SlotStats {
  int32_t rank;
  int32_t world_size;
  int32_t cuda_device;
  /// slot_flag_* bits.
  uint32_t flags;
  /// counters[i] is AllocatorSample::*allocator_counters[i].member, in that table's order:
  /// allocated, reserved, requested, active, inactive_split, peak_allocated, peak_reserved
  /// (bytes), step, step_peak_allocated, step_peak_reserved (bytes), oom, event and
  /// dropped_event counts.
  uint64_t counters[allocator_counter_count];
  int64_t updated_ns;
  /// NUL-terminated device UUID.
  char device_uuid[segment_uuid_bytes];
  /// DriverBreakdown::paired_ns (version 3; the breakdown is valid when slot_flag_breakdown).
  int64_t breakdown_paired_ns;
  /// DriverBreakdown's bytes in breakdown_fields order (breakdown_word_count); an optional part
  /// is valid only with its flag (slot_flag_first_part << i for the i-th optional part).
  uint64_t breakdown_bytes[breakdown_word_count];
  uint32_t nccl_version;
  uint32_t breakdown_unsettled;
};
// A new row in allocator_counters grows the slot: bump segment_version and update these.
static_assert(allocator_counter_count == 13 && offsetof(SlotStats, counters) == 16 &&
                  offsetof(SlotStats, updated_ns) == 120 &&
                  offsetof(SlotStats, breakdown_bytes) == 232,
              "a new counter is a segment layout change");
static_assert(sizeof(SlotStats) == 304);

/// One completed step (pid from the header).
struct StepPayload {
  /// 1-based sequence number of this entry in the ring (not the training step).
  uint64_t sequence;
  int32_t rank;
  int32_t cuda_device;
  uint64_t step;
  int64_t end_ns;
  int64_t duration_ns;
  /// bytes[i] is StepRecord::*step_byte_fields[i].member: peak allocated, peak reserved, peak
  /// requested, allocated and reserved at the end of the step.
  uint64_t bytes[step_byte_fields.size()];
  /// step_flag_* bits (version 2).
  uint64_t flags;
  /// Requested bytes per MemoryCategory live at the step's peak, when step_flag_categories is set
  /// (version 2).
  uint64_t category_bytes[segment_category_count];
  char device_uuid[segment_uuid_bytes];
};
// A new row in step_byte_fields grows the entry: bump segment_version and update these.
static_assert(sizeof(StepPayload) == 232 && offsetof(StepPayload, bytes) == 40 &&
                  offsetof(StepPayload, category_bytes) == 88,
              "a new step field is a layout change");

/// One out-of-memory error (pid from the header).
struct OomPayload {
  uint64_t sequence;
  int32_t rank;
  int32_t cuda_device;
  int64_t timestamp_ns;
  /// bytes[i] is OomRecord::*oom_byte_fields[i].member: the failed request, device total and
  /// free, allocated and reserved.
  uint64_t bytes[oom_byte_fields.size()];
  char device_uuid[segment_uuid_bytes];
};
static_assert(sizeof(OomPayload) == 160 && offsetof(OomPayload, bytes) == 24,
              "a new OOM field is a layout change");

/// A seqlock-protected block: `seq` is even when `payload` is stable.
template <typename Payload>
struct SeqBlock {
  static_assert(std::is_trivially_copyable_v<Payload> && sizeof(Payload) % 8 == 0);
  uint64_t seq;
  Payload payload;
};
using NoteBlock = SeqBlock<SegmentNote>;
using SlotBlock = SeqBlock<SlotStats>;
using StepEntry = SeqBlock<StepPayload>;
using OomEntry = SeqBlock<OomPayload>;
static_assert(sizeof(NoteBlock) == 520 && sizeof(SlotBlock) == 312 && sizeof(StepEntry) == 240 &&
              sizeof(OomEntry) == 168);

/// Byte offsets of the note and the three arrays, computed the same way by writer and reader.
struct SegmentGeometry {
  uint64_t note_offset = 0;
  /// Does the segment have a note (version 4 on)?
  bool has_note = false;
  uint64_t slots_offset = 0;
  uint64_t steps_offset = 0;
  uint64_t ooms_offset = 0;
  uint64_t total_bytes = 0;
};

/// Offsets for a segment with these counts (header_bytes must be a multiple of 8; note_bytes
/// sizeof(NoteBlock), or 0 for a version-3 segment without a note).
inline SegmentGeometry segment_geometry(uint64_t header_bytes, uint64_t note_bytes,
                                        uint64_t device_slots, uint64_t step_capacity,
                                        uint64_t oom_capacity) {
  SegmentGeometry g;
  g.note_offset = header_bytes;
  g.has_note = note_bytes != 0;
  g.slots_offset = header_bytes + note_bytes;
  g.steps_offset = g.slots_offset + device_slots * sizeof(SlotBlock);
  g.ooms_offset = g.steps_offset + step_capacity * sizeof(StepEntry);
  g.total_bytes = g.ooms_offset + oom_capacity * sizeof(OomEntry);
  return g;
}

// Word-wise atomic access to shared memory. The GCC/Clang builtins accept const pointers, so
// readers can load from a PROT_READ mapping (a 64-bit atomic load is a plain load on x86-64
// and an LDAR on AArch64; neither writes).

/// Relaxed/acquire load of one shared 64-bit word.
inline uint64_t load_word(const uint64_t* word, int order = __ATOMIC_ACQUIRE) {
  return __atomic_load_n(word, order);
}

/// Release store of one shared 64-bit word.
inline void store_word(uint64_t* word, uint64_t value, int order = __ATOMIC_RELEASE) {
  __atomic_store_n(word, value, order);
}

// The seqlock orders its words with release stores and acquire loads of the payload words
// themselves, not with standalone fences: ThreadSanitizer does not model atomic_thread_fence
// (GCC's -Wtsan), so a fence-based seqlock would look racy or, worse, hide real races from it.
// Correctness (Boehm, "Can seqlocks get along with programming language memory models?"): each
// payload store is a release sequenced after the odd `seq` store, so a reader whose acquire
// load of any word sees an overlapping write's value synchronizes with it and then re-reads at
// least that odd `seq`, and retries; the acquire loads also keep the re-read of `seq` after
// the payload loads. On x86-64 these are plain moves, as the relaxed ones were; on AArch64
// STLR/LDAR per word, at most once per publish interval (never on the allocator's hot path).

/// Seqlock write: readers that overlap it retry.
template <typename Payload>
void seqlock_write(SeqBlock<Payload>* block, const Payload& value) {
  const uint64_t seq = __atomic_load_n(&block->seq, __ATOMIC_RELAXED);
  __atomic_store_n(&block->seq, seq + 1, __ATOMIC_RELAXED);
  uint64_t words[sizeof(Payload) / 8];
  std::memcpy(words, &value, sizeof(Payload));
  auto* dst = reinterpret_cast<uint64_t*>(&block->payload);
  for (std::size_t i = 0; i < sizeof(Payload) / 8; ++i) {
    __atomic_store_n(dst + i, words[i], __ATOMIC_RELEASE);
  }
  __atomic_store_n(&block->seq, seq + 2, __ATOMIC_RELEASE);
}

/// Seqlock read: copies a consistent payload into `out`, retrying up to `max_attempts` times.
/// Returns false when the block was never written or every attempt overlapped a write.
template <typename Payload>
bool seqlock_read(const SeqBlock<Payload>* block, Payload& out, int max_attempts = 64) {
  uint64_t words[sizeof(Payload) / 8];
  const auto* src = reinterpret_cast<const uint64_t*>(&block->payload);
  for (int attempt = 0; attempt < max_attempts; ++attempt) {
    const uint64_t before = __atomic_load_n(&block->seq, __ATOMIC_ACQUIRE);
    if (before == 0) return false;
    if (before % 2 != 0) continue;
    for (std::size_t i = 0; i < sizeof(Payload) / 8; ++i) {
      words[i] = __atomic_load_n(src + i, __ATOMIC_ACQUIRE);
    }
    if (__atomic_load_n(&block->seq, __ATOMIC_RELAXED) == before) {
      std::memcpy(&out, words, sizeof(Payload));
      return true;
    }
  }
  return false;
}

/// Copies `text` into a fixed NUL-terminated field, truncating before a UTF-8 character that
/// would not fit whole (a cut never leaves half a character for a reader to show).
template <std::size_t bytes>
void copy_fixed_string(char (&field)[bytes], const char* text, std::size_t length) {
  std::memset(field, 0, bytes);
  std::size_t kept = length < bytes ? length : bytes - 1;
  // Back off over continuation bytes (10xxxxxx) so the cut lands before a lead byte.
  if (kept < length) {
    while (kept > 0 && (static_cast<unsigned char>(text[kept]) & 0xC0U) == 0x80U) --kept;
  }
  std::memcpy(field, text, kept);
}

/// Length of a fixed field that may lack its NUL (a reader never trusts the writer).
template <std::size_t bytes>
std::size_t fixed_string_length(const char (&field)[bytes]) {
  const void* nul = std::memchr(field, 0, bytes);
  return nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - field) : bytes;
}

}  // namespace vramscope::format
