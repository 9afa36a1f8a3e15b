// src/format/sample_codec.cpp -- SystemSample <-> bytes (layout described in sample_codec.hpp)
//
// Encoder and decoder share one walk over each record's fields (walk_*), so they cannot disagree
// on the order; any change to a walk is a format change and bumps recording_version. The encoder
// writes the current version only; the decoder reads every version (io.since() per field that
// changed).
#include "vramscope/format/sample_codec.hpp"

#include <array>
#include <cstring>
#include <optional>
#include <string>
#include <variant>

#include "vramscope/format/varint.hpp"

namespace vramscope::format {

namespace {

// String codes (see the header).
constexpr uint64_t string_empty = 0;
constexpr uint64_t string_literal_added = 1;
constexpr uint64_t string_literal = 2;
constexpr uint64_t string_table_base = 3;

// DeviceSample flag bits: presence of each optional, then the booleans.
enum DeviceFlag : uint32_t {
  DeviceHasTotal = 1U << 0U,
  DeviceHasReserved = 1U << 1U,
  DeviceHasUsed = 1U << 2U,
  DeviceHasFree = 1U << 3U,
  DeviceHasBar1Total = 1U << 4U,
  DeviceHasBar1Used = 1U << 5U,
  DeviceHasMigEnabled = 1U << 6U,
  DeviceMigEnabled = 1U << 7U,
  DeviceMemoryV2 = 1U << 8U,
  DeviceProcessesSupported = 1U << 9U,
  DeviceLost = 1U << 10U,
  DeviceKnownFlags = (1U << 11U) - 1,
};

// ProcessSample flags: the kinds bitmask in the low byte, then presence bits and `visible`.
enum ProcessFlag : uint32_t {
  ProcessKindsMask = 0xFFU,
  ProcessHasUsed = 1U << 8U,
  ProcessHasGpuInstance = 1U << 9U,
  ProcessHasComputeInstance = 1U << 10U,
  ProcessVisible = 1U << 11U,
  ProcessKnownFlags = (1U << 12U) - 1,
};

enum MigFlag : uint32_t {
  MigHasGpuInstance = 1U << 0U,
  MigHasComputeInstance = 1U << 1U,
  MigHasTotal = 1U << 2U,
  MigHasUsed = 1U << 3U,
  MigHasFree = 1U << 4U,
  MigKnownFlags = (1U << 5U) - 1,
};

enum AllocatorFlag : uint32_t {
  AllocatorPollingOnly = 1U << 0U,
  /// Version 4 on: a DriverBreakdown follows the allocator's fields.
  AllocatorHasBreakdown = 1U << 1U,
  /// Version 5 on: the polling reason follows (after the breakdown, when there is one).
  AllocatorHasPollingReason = 1U << 2U,
  AllocatorKnownFlags = (1U << 3U) - 1,
  /// What versions 1 to 3 and version 4 knew: a file of those versions with any other bit is
  /// damaged.
  AllocatorKnownFlagsBefore4 = AllocatorPollingOnly,
  AllocatorKnownFlagsBefore5 = AllocatorPollingOnly | AllocatorHasBreakdown,
};

// DriverBreakdown flags (version 4 on): bit i is the presence of the i-th optional part of
// breakdown_fields (private pools, NCCL, other, first context).
enum BreakdownFlag : uint32_t {
  BreakdownKnownFlags = (1U << 4U) - 1,
};

// StepRecord flags (version 2 on).
enum StepFlag : uint32_t {
  StepHasCategories = 1U << 0U,
  StepKnownFlags = 1,
};

/// The first version whose step records carry flags and per-category bytes.
constexpr uint16_t first_version_with_step_categories = 2;
/// The first version whose allocator records may carry the agent's settled driver breakdown.
constexpr uint16_t first_version_with_driver_breakdown = 4;
/// The first version whose allocator records may carry why the process polls.
constexpr uint16_t first_version_with_polling_reason = 5;
static_assert(recording_version >= first_version_with_polling_reason);

// Allocator counters are stored in allocator_counters order, all of them in every version so
// far. A new row there is a format change: bump recording_version and read the new counter
// only from that version on (older files leave it 0).
// The same holds for step_byte_fields and oom_byte_fields.
static_assert(allocator_counter_count == 13 && step_byte_fields.size() == 5 &&
                  oom_byte_fields.size() == 5,
              "a new record field is a recording format change");

/// Wrapping difference, so that any pair of int64 timestamps round-trips without overflow.
int64_t wrapping_delta(int64_t value, int64_t base) {
  return static_cast<int64_t>(static_cast<uint64_t>(value) - static_cast<uint64_t>(base));
}

int64_t wrapping_add(int64_t base, int64_t delta) {
  return static_cast<int64_t>(static_cast<uint64_t>(base) + static_cast<uint64_t>(delta));
}

void put_signed(std::string& out, int64_t value) { put_varint(out, zigzag(value)); }

void put_literal(std::string& out, std::string_view text) {
  put_varint(out, text.size());
  out.append(text);
}

}  // namespace

std::string_view clip_utf8(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  // Back off over continuation bytes (10xxxxxx) so the cut lands before a lead byte.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0U) == 0x80U) --end;
  return text.substr(0, end);
}

// ---------------------------------------------------------------------------------------------
// The fields, once for both directions
//
// Each walk_* function names one record's fields in stored order. `Io` is the Emitter, which
// writes a const record, or the Cursor, which fills a mutable one (reused from the previous
// sample, so every field is assigned). Presence bits of optionals and booleans go through one
// flag word: the Emitter's FlagWriter builds it from the record, the Cursor's FlagReader applies
// it (engaging each present optional, whose value the following opt() then reads).

namespace {

/// Builds a flag word from a record (encoding).
struct FlagWriter {
  uint32_t bits = 0;
  template <typename T>
  void present(const std::optional<T>& value, uint32_t bit) {
    if (value) bits |= bit;
  }
  void boolean(bool value, uint32_t bit) {
    if (value) bits |= bit;
  }
  /// A string stored only when not empty: its bit says it follows (the walk reads it).
  void nonempty(const std::string& text, uint32_t bit) {
    if (!text.empty()) bits |= bit;
  }
  /// An optional<bool>: one bit for presence, one for the value.
  void optional_bool(const std::optional<bool>& value, uint32_t has_bit, uint32_t value_bit) {
    if (value) bits |= has_bit;
    if (value.value_or(false)) bits |= value_bit;
  }
  void low_bits(uint8_t value, uint32_t /*mask*/) { bits |= value; }
};

/// Applies a flag word read from a file to a record (decoding).
struct FlagReader {
  uint32_t bits = 0;
  template <typename T>
  void present(std::optional<T>& value, uint32_t bit) {
    if ((bits & bit) != 0) {
      value.emplace();
    } else {
      value.reset();
    }
  }
  void boolean(bool& value, uint32_t bit) const { value = (bits & bit) != 0; }
  /// The walk reads the string when the flag word returned by flags() has the bit.
  void nonempty(std::string& /*text*/, uint32_t /*bit*/) const {}
  void optional_bool(std::optional<bool>& value, uint32_t has_bit, uint32_t value_bit) const {
    if ((bits & value_bit) != 0 && (bits & has_bit) == 0) {
      throw FormatError("MIG value without presence bit");
    }
    value.reset();
    if ((bits & has_bit) != 0) value = (bits & value_bit) != 0;
  }
  void low_bits(uint8_t& value, uint32_t mask) const { value = static_cast<uint8_t>(bits & mask); }
};

template <typename Io, typename Mig>
void walk_mig(Io& io, Mig& m) {
  io.u32(m.index, "MIG index");
  io.str(m.uuid);
  io.flags(MigKnownFlags, "MIG", [&](auto& f) {
    f.present(m.gpu_instance_id, MigHasGpuInstance);
    f.present(m.compute_instance_id, MigHasComputeInstance);
    f.present(m.total_bytes, MigHasTotal);
    f.present(m.used_bytes, MigHasUsed);
    f.present(m.free_bytes, MigHasFree);
  });
  io.opt(m.gpu_instance_id);
  io.opt(m.compute_instance_id);
  io.opt(m.total_bytes);
  io.opt(m.used_bytes);
  io.opt(m.free_bytes);
}

template <typename Io, typename Process>
void walk_process(Io& io, Process& p) {
  io.u32(p.pid, "pid");
  io.flags(ProcessKnownFlags, "process", [&](auto& f) {
    f.low_bits(p.kinds, ProcessKindsMask);
    f.present(p.used_bytes, ProcessHasUsed);
    f.present(p.gpu_instance_id, ProcessHasGpuInstance);
    f.present(p.compute_instance_id, ProcessHasComputeInstance);
    f.boolean(p.visible, ProcessVisible);
  });
  io.opt(p.used_bytes);
  io.opt(p.gpu_instance_id);
  io.opt(p.compute_instance_id);
  io.str(p.user);
  io.str(p.command);
}

template <typename Io, typename Device>
void walk_device(Io& io, Device& d) {
  io.u32(d.index, "device index");
  io.str(d.name);
  io.str(d.uuid);
  io.str(d.pci_bus_id);
  io.flags(DeviceKnownFlags, "device", [&](auto& f) {
    f.present(d.total_bytes, DeviceHasTotal);
    f.present(d.reserved_bytes, DeviceHasReserved);
    f.present(d.used_bytes, DeviceHasUsed);
    f.present(d.free_bytes, DeviceHasFree);
    f.present(d.bar1_total_bytes, DeviceHasBar1Total);
    f.present(d.bar1_used_bytes, DeviceHasBar1Used);
    f.optional_bool(d.mig_enabled, DeviceHasMigEnabled, DeviceMigEnabled);
    f.boolean(d.memory_v2, DeviceMemoryV2);
    f.boolean(d.processes_supported, DeviceProcessesSupported);
    f.boolean(d.lost, DeviceLost);
  });
  io.opt(d.total_bytes);
  io.opt(d.reserved_bytes);
  io.opt(d.used_bytes);
  io.opt(d.free_bytes);
  io.opt(d.bar1_total_bytes);
  io.opt(d.bar1_used_bytes);
  io.list(d.mig_instances, max_mig_instances, "MIG instance", [&](auto& m) { walk_mig(io, m); });
  io.list(d.processes, max_processes, "process", [&](auto& p) { walk_process(io, p); });
  io.str(d.error);
}

/// The rows of breakdown_fields whose member is a `T DriverBreakdown::*`, in the table's order.
template <typename T>
constexpr auto breakdown_members() {
  std::array<T DriverBreakdown::*, breakdown_field_count<T>()> out{};
  std::size_t at = 0;
  for (const BreakdownField& field : breakdown_fields) {
    // holds_alternative and get, not get_if: GCC's sanitizers make get_if's pointer test no
    // constant expression.
    if (std::holds_alternative<T DriverBreakdown::*>(field.member)) {
      out[at++] = std::get<T DriverBreakdown::*>(field.member);
    }
  }
  return out;
}

template <typename Io, typename Breakdown>
void walk_breakdown(Io& io, Breakdown& b) {
  // breakdown_fields grouped by type, each group in the table's order: the time (stored whole,
  // not against the sample's timestamp: it changes at the agent's pairings, 4 Hz, so between
  // them zstd sees the same bytes again; 1x8 steady state: 37 B a sample, 40 B as a delta), the
  // bytes always measured, the presence of the optional bytes (bit i for the i-th), those
  // present, then the 32-bit numbers.
  static constexpr auto times = breakdown_members<int64_t>();
  static constexpr auto bytes = breakdown_members<uint64_t>();
  static constexpr auto optional_bytes = breakdown_members<std::optional<uint64_t>>();
  static constexpr auto numbers = breakdown_members<uint32_t>();
  static_assert(
      times.size() == 1 && bytes.size() == 4 && optional_bytes.size() == 4 && numbers.size() == 2 &&
          BreakdownKnownFlags == (1U << optional_bytes.size()) - 1,
      "a new DriverBreakdown field is a change of the recording format: bump its version");
  for (const auto member : times) io.s64(b.*member);
  for (const auto member : bytes) io.u64(b.*member);
  io.flags(BreakdownKnownFlags, "driver breakdown", [&](auto& f) {
    for (std::size_t i = 0; i < optional_bytes.size(); ++i) {
      f.present(b.*optional_bytes[i], 1U << i);
    }
  });
  for (const auto member : optional_bytes) io.opt(b.*member);
  for (const auto member : numbers) io.u32(b.*member, "driver breakdown number");
}

template <typename Io, typename Allocator>
void walk_allocator(Io& io, Allocator& a, int64_t timestamp_ns) {
  io.u32(a.pid, "pid");
  io.s32(a.rank, "rank");
  io.s32(a.world_size, "world size");
  io.s32(a.cuda_device, "CUDA device");
  io.str(a.device_uuid);
  for (const AllocatorCounter& counter : allocator_counters) io.u64(a.*counter.member);
  const uint32_t known = io.since(first_version_with_polling_reason) ? AllocatorKnownFlags
                         : io.since(first_version_with_driver_breakdown)
                             ? AllocatorKnownFlagsBefore5
                             : AllocatorKnownFlagsBefore4;
  const uint32_t bits = io.flags(known, "allocator", [&](auto& f) {
    f.boolean(a.polling_only, AllocatorPollingOnly);
    f.present(a.breakdown, AllocatorHasBreakdown);
    f.nonempty(a.polling_reason, AllocatorHasPollingReason);
  });
  io.time(a.updated_ns, timestamp_ns);
  if (a.breakdown) walk_breakdown(io, *a.breakdown);
  // A string code (the reason repeats, so each sample after the first stores a table index).
  if ((bits & AllocatorHasPollingReason) != 0) {
    io.text(a.polling_reason, "polling reason");
  } else {
    io.absent(a.polling_reason);
  }
}

template <typename Io, typename Step>
void walk_step(Io& io, Step& r, int64_t timestamp_ns) {
  io.u32(r.pid, "pid");
  io.s32(r.rank, "rank");
  io.s32(r.cuda_device, "CUDA device");
  io.str(r.device_uuid);
  io.u64(r.step);
  io.time(r.end_ns, timestamp_ns);
  io.s64(r.duration_ns);
  for (const auto& field : step_byte_fields) io.u64(r.*field.member);
  if (!io.since(first_version_with_step_categories)) {
    io.absent(r.category_bytes);
    return;
  }
  io.flags(StepKnownFlags, "step",
           [&](auto& f) { f.present(r.category_bytes, StepHasCategories); });
  if (r.category_bytes) {
    for (auto& value : *r.category_bytes) io.u64(value);
  }
}

template <typename Io, typename Oom>
void walk_oom(Io& io, Oom& r, int64_t timestamp_ns) {
  io.u32(r.pid, "pid");
  io.s32(r.rank, "rank");
  io.s32(r.cuda_device, "CUDA device");
  io.str(r.device_uuid);
  io.time(r.timestamp_ns, timestamp_ns);
  for (const auto& field : oom_byte_fields) io.u64(r.*field.member);
}

template <typename Io, typename Sample>
void walk_sample(Io& io, Sample& sample, int64_t base_timestamp_ns) {
  io.time(sample.timestamp_ns, base_timestamp_ns);
  io.str(sample.hostname);
  io.str(sample.driver_version);
  // Record timestamps are deltas from the sample's own, which the Cursor has just read.
  const int64_t at_ns = sample.timestamp_ns;
  io.list(sample.devices, max_devices, "device", [&](auto& d) { walk_device(io, d); });
  io.list(sample.allocators, max_allocators, "allocator",
          [&](auto& a) { walk_allocator(io, a, at_ns); });
  io.list(sample.steps, max_records, "step", [&](auto& r) { walk_step(io, r, at_ns); });
  io.list(sample.ooms, max_records, "OOM", [&](auto& r) { walk_oom(io, r, at_ns); });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Encoding

/// Writes one sample's fields through the encoder's string table.
class Emitter {
 public:
  Emitter(SampleEncoder& encoder, std::string& out) : m_encoder(encoder), m_out(out) {}

  void u(uint64_t value) { put_varint(m_out, value); }
  void s(int64_t value) { put_signed(m_out, value); }
  void str(std::string_view text) { m_encoder.put_string(text, m_out); }

  // The field operations of the walk_* functions (see "The fields, once for both directions").
  void u32(uint32_t value, const char* /*what*/) { u(value); }
  void s32(int32_t value, const char* /*what*/) { s(value); }
  void u64(uint64_t value) { u(value); }
  void s64(int64_t value) { s(value); }
  void time(int64_t value_ns, int64_t base_ns) { s(wrapping_delta(value_ns, base_ns)); }
  template <typename T>
  void opt(const std::optional<T>& value) {
    if (value) u(*value);
  }
  template <typename Fn>
  uint32_t flags(uint32_t /*known*/, const char* /*what*/, Fn&& name_bits) {
    FlagWriter writer;
    name_bits(writer);
    u(writer.bits);
    return writer.bits;
  }
  /// A string its flag says is there (never empty).
  void text(const std::string& value, const char* /*what*/) { str(value); }
  template <typename T, typename Fn>
  void list(const std::vector<T>& items, uint32_t /*maximum*/, const char* /*what*/, Fn&& each) {
    u(items.size());
    for (const T& item : items) each(item);
  }
  /// The encoder writes the current version, which has every field.
  bool since(uint16_t /*version*/) const { return true; }
  template <typename T>
  void absent(const std::optional<T>& /*value*/) {}
  void absent(const std::string& /*value*/) {}

  void sample(const SystemSample& sample, int64_t base_timestamp_ns) {
    walk_sample(*this, sample, base_timestamp_ns);
  }

 private:
  SampleEncoder& m_encoder;
  std::string& m_out;
};

void SampleEncoder::put_string(std::string_view text, std::string& out) {
  text = clip_utf8(text, max_string_bytes);
  if (text.empty()) {
    put_varint(out, string_empty);
    return;
  }
  // The k-th string of a sample is mostly the k-th of the sample before (a GPU's name, a
  // process's command): that entry is compared first, and the table hashed only when it differs.
  const std::size_t call = m_string_calls++;
  if (call < m_recent.size()) {
    const uint32_t index = m_recent[call];
    if (index < m_order.size() && m_order[index]->first == text) {
      put_varint(out, string_table_base + index);
      return;
    }
  }
  const auto remember = [&](uint32_t index) {
    if (call >= max_recent_strings) return;
    if (m_recent.size() <= call) m_recent.resize(call + 1, UINT32_MAX);
    m_recent[call] = index;
  };
  if (auto found = m_table.find(text); found != m_table.end()) {
    remember(found->second);
    put_varint(out, string_table_base + found->second);
    return;
  }
  if (m_table.size() < max_table_strings && m_table_bytes + text.size() <= max_table_bytes) {
    const auto index = static_cast<uint32_t>(m_table.size());
    m_order.push_back(m_table.emplace(std::string(text), index).first);
    m_table_bytes += text.size();
    remember(index);
    put_varint(out, string_literal_added);
  } else {
    put_varint(out, string_literal);
  }
  put_literal(out, text);
}

void SampleEncoder::shrink_table(std::size_t size) {
  while (m_order.size() > size) {
    m_table_bytes -= m_order.back()->first.size();
    m_table.erase(m_order.back());
    m_order.pop_back();
  }
}

bool SampleEncoder::encode(const SystemSample& sample, int64_t base_timestamp_ns,
                           std::string& out) {
  const std::size_t table_mark = m_order.size();
  m_string_calls = 0;
  m_scratch.clear();
  Emitter(*this, m_scratch).sample(sample, base_timestamp_ns);
  if (m_scratch.size() > max_sample_bytes) {
    shrink_table(table_mark);
    return false;
  }
  put_varint(out, m_scratch.size());
  out.append(m_scratch);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Reads fields from a bounded byte range; every read checks what is left.
class Cursor {
 public:
  Cursor(SampleDecoder& decoder, std::string_view bytes) : m_decoder(decoder), m_bytes(bytes) {}

  std::size_t remaining() const { return m_bytes.size(); }

  /// get_varint() for 64 bits, written out: most of a sample is varints. With ten bytes left
  /// (all but a sample's last few fields) a varint of up to 8 bytes is read from one 64-bit
  /// load: its end is the first byte without the top bit, and its 7-bit groups are packed
  /// together in three steps, whatever its length (byte counts take 5). The rest go through
  /// the checked loops.
  [[gnu::always_inline]] uint64_t u() {
    if (m_bytes.size() < 10) return u_near_end();
    const auto* const p = reinterpret_cast<const unsigned char*>(m_bytes.data());
    if (p[0] < 0x80U) {
      m_bytes.remove_prefix(1);
      return p[0];
    }
    if (p[1] < 0x80U) {  // two bytes: flag words, most counts
      m_bytes.remove_prefix(2);
      return (p[0] & 0x7FU) | (static_cast<uint64_t>(p[1]) << 7U);
    }
    uint64_t word = 0;
    std::memcpy(&word, p, sizeof word);  // little-endian (recording_layout.hpp asserts it)
    const uint64_t ends = ~word & 0x8080808080808080ULL;
    if (ends == 0) return u_long();
    const auto used = static_cast<unsigned>(__builtin_ctzll(ends) / 8 + 1);
    if (used < 8) word &= (uint64_t{1} << (8 * used)) - 1;
    word &= 0x7F7F7F7F7F7F7F7FULL;
    word = (word & 0x007F007F007F007FULL) | ((word & 0x7F007F007F007F00ULL) >> 1U);
    word = (word & 0x00003FFF00003FFFULL) | ((word & 0x3FFF00003FFF0000ULL) >> 2U);
    word = (word & 0x000000000FFFFFFFULL) | ((word & 0x0FFFFFFF00000000ULL) >> 4U);
    m_bytes.remove_prefix(used);
    return word;
  }

  /// u() for a varint of 9 or 10 bytes, with at least ten left.
  [[gnu::noinline]] uint64_t u_long() {
    const auto* const p = reinterpret_cast<const unsigned char*>(m_bytes.data());
    uint64_t value = 0;
    for (std::size_t i = 0; i < 9; ++i) value |= static_cast<uint64_t>(p[i] & 0x7FU) << (7 * i);
    if (p[8] < 0x80U) {
      m_bytes.remove_prefix(9);
      return value;
    }
    // The 10th byte of a 64-bit value may only carry its top bit.
    if (p[9] > 1) throw FormatError("varint overflows 64 bits");
    m_bytes.remove_prefix(10);
    return value | (uint64_t{p[9]} << 63U);
  }

  /// u() within the last ten bytes, checking the end at every byte.
  [[gnu::noinline]] uint64_t u_near_end() {
    const auto* const bytes = reinterpret_cast<const unsigned char*>(m_bytes.data());
    uint64_t value = 0;
    for (std::size_t i = 0; i < m_bytes.size(); ++i) {
      const unsigned byte = bytes[i];
      value |= static_cast<uint64_t>(byte & 0x7FU) << (7 * i);
      if ((byte & 0x80U) == 0) {
        m_bytes.remove_prefix(i + 1);
        return value;
      }
    }
    throw FormatError("varint runs past the end");
  }

  // Each check below throws through a function of its own: the message is built there, out of
  // line, so that the checks themselves inline into the walk of every field.

  /// Throws "<what> exceeds 32 bits".
  [[noreturn, gnu::noinline, gnu::cold]] static void too_wide(const char* what) {
    throw FormatError(std::string(what) + " exceeds 32 bits");
  }

  uint32_t read_u32(const char* what) {
    const uint64_t value = u();
    if (value > UINT32_MAX) too_wide(what);
    return static_cast<uint32_t>(value);
  }

  int64_t s() { return unzigzag(u()); }

  int32_t read_s32(const char* what) {
    const int64_t value = s();
    if (value < INT32_MIN || value > INT32_MAX) too_wide(what);
    return static_cast<int32_t>(value);
  }

  /// A count of elements of type T that each take at least one byte, bounded by `maximum`.
  /// The memory the elements will take is charged to the decoder's expansion budget.
  template <typename T>
  std::size_t count(uint32_t maximum, const char* what) {
    const uint64_t value = u();
    if (value > maximum || value > remaining()) implausible_count(what, value);
    charge(value * sizeof(T));
    return static_cast<std::size_t>(value);
  }

  /// Throws "implausible <what> count <value>".
  [[noreturn, gnu::noinline, gnu::cold]] static void implausible_count(const char* what,
                                                                       uint64_t value) {
    throw FormatError(std::string("implausible ") + what + " count " + std::to_string(value));
  }

  /// Charges `bytes` about to be made to the sample's budget; throws before exceeding it.
  void charge(uint64_t bytes) {
    if (bytes > max_decoded_sample_bytes - m_decoder.m_expanded_bytes) expands_too_far();
    m_decoder.m_expanded_bytes += bytes;
  }

  /// Throws what charge() refuses.
  [[noreturn, gnu::noinline, gnu::cold]] static void expands_too_far() {
    throw FormatError("sample expands implausibly (beyond " +
                      std::to_string(max_decoded_sample_bytes >> 20U) + " MiB)");
  }

  uint32_t read_flags(uint32_t known, const char* what) {
    const uint64_t value = u();
    if ((value & ~static_cast<uint64_t>(known)) != 0) unknown_flags(what);
    return static_cast<uint32_t>(value);
  }

  /// Throws "unknown <what> flag bits".
  [[noreturn, gnu::noinline, gnu::cold]] static void unknown_flags(const char* what) {
    throw FormatError(std::string("unknown ") + what + " flag bits");
  }

  std::string_view take(std::size_t size) {
    if (size > remaining()) throw FormatError("field runs past the end");
    const std::string_view out = m_bytes.substr(0, size);
    m_bytes.remove_prefix(size);
    return out;
  }

  /// A string field. Most strings of a steady recording are empty or a table reference: an
  /// empty one (code 0) is taken here, inline; str_coded() reads the rest.
  void str(std::string& out) {
    if (!m_bytes.empty() && m_bytes[0] == 0) {
      m_bytes.remove_prefix(1);
      out.clear();
      return;
    }
    str_coded(out);
  }

  [[gnu::noinline]] void str_coded(std::string& out) {
    const uint64_t code = u();
    if (code == string_empty) {
      out.clear();
      return;
    }
    if (code == string_literal || code == string_literal_added) {
      const uint64_t size = u();
      if (size == 0 || size > max_string_bytes) throw FormatError("bad string length");
      charge(size);
      out.assign(take(static_cast<std::size_t>(size)));
      if (code == string_literal_added) {
        auto& table = m_decoder.m_table;
        if (table.size() >= max_table_strings || m_decoder.m_table_bytes + size > max_table_bytes) {
          throw FormatError("string table overflow");
        }
        table.push_back(out);
        m_decoder.m_table_bytes += size;
      }
    } else {
      const uint64_t index = code - string_table_base;
      if (index >= m_decoder.m_table.size()) throw FormatError("string reference out of range");
      const std::string& text = m_decoder.m_table[static_cast<std::size_t>(index)];
      charge(text.size());
      out = text;
    }
  }

  // The field operations of the walk_* functions (see "The fields, once for both directions").
  void u32(uint32_t& out, const char* what) { out = read_u32(what); }
  void s32(int32_t& out, const char* what) { out = read_s32(what); }
  void u64(uint64_t& out) { out = u(); }
  void s64(int64_t& out) { out = s(); }
  void time(int64_t& out_ns, int64_t base_ns) { out_ns = wrapping_add(base_ns, s()); }
  /// Reads the value of an optional that its presence bit engaged (flags() ran before).
  template <typename T>
  void opt(std::optional<T>& out) {
    if (!out) return;
    if constexpr (sizeof(T) == 4) {
      out = read_u32("optional field");
    } else {
      out = u();
    }
  }
  template <typename Fn>
  uint32_t flags(uint32_t known, const char* what, Fn&& name_bits) {
    FlagReader reader{read_flags(known, what)};
    name_bits(reader);
    return reader.bits;
  }
  /// A string its flag says is there: an empty one is a damaged record.
  void text(std::string& out, const char* what) {
    str(out);
    if (out.empty()) empty_text(what);
  }

  /// Throws "empty <what>".
  [[noreturn, gnu::noinline, gnu::cold]] static void empty_text(const char* what) {
    throw FormatError(std::string("empty ") + what);
  }
  template <typename T, typename Fn>
  void list(std::vector<T>& items, uint32_t maximum, const char* what, Fn&& each) {
    items.resize(count<T>(maximum, what));
    for (T& item : items) each(item);
  }
  /// Does the file's version carry fields added in `version`?
  bool since(uint16_t version) const { return m_decoder.m_version >= version; }
  /// A field the file's version does not carry: empty, not left over from a reused sample.
  template <typename T>
  void absent(std::optional<T>& out) {
    out.reset();
  }
  void absent(std::string& out) { out.clear(); }

  void sample(SystemSample& out, int64_t base_timestamp_ns) {
    walk_sample(*this, out, base_timestamp_ns);
  }

 private:
  SampleDecoder& m_decoder;
  std::string_view m_bytes;
};

void SampleDecoder::decode(std::string_view& bytes, int64_t base_timestamp_ns, SystemSample& out) {
  m_expanded_bytes = 0;
  Cursor outer(*this, bytes);
  const uint64_t size = outer.u();
  if (size == 0 || size > outer.remaining()) throw FormatError("bad sample length");
  Cursor inner(*this, outer.take(static_cast<std::size_t>(size)));
  inner.sample(out, base_timestamp_ns);
  if (inner.remaining() != 0) throw FormatError("trailing bytes after a sample");
  bytes.remove_prefix(bytes.size() - outer.remaining());
}

// ---------------------------------------------------------------------------------------------
// Metadata

std::string encode_metadata(const RecordingMetadata& metadata) {
  std::string out;
  put_signed(out, metadata.created_ns);
  put_signed(out, metadata.interval_ns);
  for (const std::string* text : {&metadata.hostname, &metadata.driver_version, &metadata.command,
                                  &metadata.writer_version}) {
    put_literal(out, clip_utf8(*text, max_string_bytes));
  }
  return out;
}

RecordingMetadata decode_metadata(std::string_view bytes) {
  SampleDecoder unused;
  Cursor cursor(unused, bytes);
  RecordingMetadata metadata;
  metadata.created_ns = cursor.s();
  metadata.interval_ns = cursor.s();
  for (std::string* text : {&metadata.hostname, &metadata.driver_version, &metadata.command,
                            &metadata.writer_version}) {
    const uint64_t size = cursor.u();
    if (size > max_string_bytes) throw FormatError("metadata string too long");
    text->assign(cursor.take(static_cast<std::size_t>(size)));
  }
  return metadata;
}

}  // namespace vramscope::format
