// tests/cpp/tracking/test_driver_pairing.cpp -- settled pairings of a synthetic driver with synthetic segment streams, the parts' arithmetic, the address walk
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "vramscope/core/plausible.hpp"
#include "vramscope/tracking/address_walk.hpp"
#include "vramscope/tracking/device_counters.hpp"
#include "vramscope/tracking/driver_pairing.hpp"

namespace vramscope::tracking {
namespace {

constexpr uint64_t mib = uint64_t{1} << 20U;
constexpr int64_t ms = 1'000'000;

/// One process as the driver sees it, in simulated time: a context, allocations outside
/// torch, and torch's segments. A cudaMalloc charges the driver when it starts and returns
/// `malloc_ns` later, and only then does torch trace SEGMENT_ALLOC; torch traces SEGMENT_FREE
/// before cudaFree, which uncharges `free_ns` later. The driver's reading and the walk see the
/// driver's side; the counters see torch's trace.
class World final : public DriverSource {
 public:
  World(uint64_t context, uint64_t other) : m_context(context), m_other(other) {}

  /// Schedules a segment of `bytes` whose cudaMalloc starts at `at`.
  void segment_alloc(int64_t at, uint64_t bytes, int64_t malloc_ns) {
    m_changes.push_back({at, static_cast<int64_t>(bytes), false});
    m_changes.push_back({at + malloc_ns, static_cast<int64_t>(bytes), true});
  }
  /// Schedules a SEGMENT_FREE traced at `at`, cudaFree done `free_ns` later.
  void segment_free(int64_t at, uint64_t bytes, int64_t free_ns) {
    m_changes.push_back({at, -static_cast<int64_t>(bytes), true});
    m_changes.push_back({at + free_ns, -static_cast<int64_t>(bytes), false});
  }
  /// Schedules another library's allocation at `at`.
  void outside_alloc(int64_t at, uint64_t bytes) { m_outside.emplace_back(at, bytes); }

  /// Applies everything scheduled up to `now`.
  void run_until(int64_t now) {
    std::stable_sort(m_changes.begin(), m_changes.end(),
                     [](const Change& a, const Change& b) { return a.at < b.at; });
    while (m_next < m_changes.size() && m_changes[m_next].at <= now) {
      const Change& c = m_changes[m_next++];
      if (c.traced) {
        counters.on_event(c.delta > 0 ? Action::SegmentAlloc : Action::SegmentFree,
                          static_cast<uint64_t>(c.delta > 0 ? c.delta : -c.delta));
      } else {
        m_driver_segments += c.delta;
      }
    }
    m_now = now;
  }

  uint64_t other_now() const {
    uint64_t other = m_other;
    for (const auto& [at, bytes] : m_outside) other += at <= m_now ? bytes : 0;
    return other;
  }
  std::optional<uint64_t> process_bytes(std::size_t) override {
    ++readings;
    return m_context + other_now() + static_cast<uint64_t>(m_driver_segments);
  }
  std::optional<uint64_t> allocation_bytes(std::size_t) override {
    ++listings;
    return other_now() + static_cast<uint64_t>(m_driver_segments);
  }

  DeviceCounters counters;
  int readings = 0;
  int listings = 0;

 private:
  struct Change {
    int64_t at;
    int64_t delta;
    /// Torch's trace (counters) or the driver's side?
    bool traced;
  };
  uint64_t m_context;
  uint64_t m_other;
  std::vector<Change> m_changes;
  std::size_t m_next = 0;
  std::vector<std::pair<int64_t, uint64_t>> m_outside;
  int64_t m_driver_segments = 0;
  int64_t m_now = 0;
};

/// Runs the pairing against the world until `end`, calling `on_settled` with every new breakdown.
template <typename OnSettled>
void drive(World& world, DriverPairing& pairing, int64_t end, OnSettled&& on_settled) {
  int64_t now = 0;
  int64_t last_paired = -1;
  while (now < end) {
    world.run_until(now);
    const int64_t due = pairing.advance(now, now);
    const std::optional<DriverBreakdown> b = pairing.breakdown(0);
    if (b && b->paired_ns != last_paired) {
      last_paired = b->paired_ns;
      on_settled(*b);
    }
    ASSERT_GT(due, now);
    now = due;
  }
}

TEST(DriverPairing, GrowthNeverInventsNonPytorchMemory) {
  // A growth-heavy run: a 1 GiB segment every 30 ms for 3 s (each cudaMalloc takes 4 ms), then
  // frees, with another library's 512 mib arriving in between.
  World world(518 * mib, 64 * mib);
  for (int i = 0; i < 100; ++i) world.segment_alloc(200 * ms + i * 30 * ms, 1024 * mib, 4 * ms);
  for (int i = 0; i < 50; ++i) world.segment_free(3500 * ms + i * 20 * ms, 1024 * mib, 3 * ms);
  world.outside_alloc(1700 * ms, 512 * mib);
  DriverPairing pairing({&world.counters}, world);
  int settled = 0;
  drive(world, pairing, 8000 * ms, [&](const DriverBreakdown& b) {
    ++settled;
    EXPECT_EQ(b.context_bytes, 518 * mib) << "at " << b.paired_ns;
    ASSERT_TRUE(b.other_bytes.has_value());
    const uint64_t other = b.paired_ns >= 1700 * ms ? 576 * mib : 64 * mib;
    EXPECT_EQ(*b.other_bytes, other) << "at " << b.paired_ns;
    EXPECT_EQ(b.excess_bytes, 0U);
    EXPECT_EQ(b.driver_bytes, b.reserved_bytes + b.non_pytorch_bytes());
  });
  // Settled before the growth, none during it (segments every 30 ms: never quiet for the
  // 50 ms guards), and again after the frees.
  EXPECT_GE(settled, 4);
  const std::optional<DriverBreakdown> last = pairing.breakdown(0);
  ASSERT_TRUE(last.has_value());
  EXPECT_GT(last->unsettled_count, 0U);
  EXPECT_EQ(last->reserved_bytes, 50 * 1024 * mib);
}

TEST(DriverPairing, ACudaFreeStillRunningAfterItsTraceIsNotPaired) {
  // torch traces SEGMENT_FREE, then cudaFree takes 70 ms (longer than a guard) to uncharge.
  // Segment events are 230 ms apart, so a quiet window opens inside many of these frees: the
  // count alone would keep readings that still see the freed segment. The driver's number
  // moving inside the window keeps them out.
  World world(518 * mib, 64 * mib);
  for (int i = 0; i < 24; ++i) world.segment_alloc(10 * ms + i * ms / 2, 64 * mib, ms / 4);
  for (int i = 0; i < 24; ++i) world.segment_free(1000 * ms + i * 230 * ms, 64 * mib, 70 * ms);
  DriverPairing pairing({&world.counters}, world);
  int settled = 0;
  drive(world, pairing, 8000 * ms, [&](const DriverBreakdown& b) {
    ++settled;
    EXPECT_EQ(b.non_pytorch_bytes(), 582 * mib) << "at " << b.paired_ns / ms << " ms";
  });
  EXPECT_GE(settled, 4);
}

TEST(DriverPairing, AReadingDuringGrowthWouldBeWrong) {
  // The control for the test above: the same world read without the guards (the driver minus
  // the counters at an arbitrary instant) is off, so the guards are what keep it right.
  World world(518 * mib, 64 * mib);
  world.segment_alloc(10 * ms, 1024 * mib, 4 * ms);
  world.run_until(12 * ms);  // inside the cudaMalloc: the driver charged, torch not traced yet
  const uint64_t unpaired = *world.process_bytes(0) - world.counters.reserved_bytes();
  EXPECT_EQ(unpaired, (518 + 64 + 1024) * mib);
}

TEST(DriverPairing, WalksOnlyWhenWhatTorchDoesNotHoldMoves) {
  World world(518 * mib, 64 * mib);
  world.segment_alloc(100 * ms, 256 * mib, 1 * ms);
  world.segment_alloc(2500 * ms, 256 * mib, 1 * ms);
  DriverPairing pairing({&world.counters}, world);
  drive(world, pairing, 6000 * ms, [](const DriverBreakdown&) {});
  // Torch's growth does not move driver - reserved: a walk at the start, and at most one more
  // for a reading that caught a cudaMalloc before its trace (that reading is then unsettled).
  EXPECT_LE(world.listings, 2);
  EXPECT_GE(world.readings, 5 * world.listings);
  World moved(518 * mib, 64 * mib);
  moved.outside_alloc(2500 * ms, 4 * mib);
  DriverPairing again({&moved.counters}, moved);
  std::optional<uint64_t> last_other;
  drive(moved, again, 6000 * ms, [&](const DriverBreakdown& b) { last_other = b.other_bytes; });
  EXPECT_GE(moved.listings, 2);
  EXPECT_EQ(last_other, 68 * mib);
}

TEST(DriverPairing, AListingThatMissesTorchBytesNamesTheExcessAtEveryPairing) {
  // The walk finds 8 MiB less than torch reserves (a segment it missed) and nothing else: other
  // is 0 and the 8 MiB are an excess, at the listing and at every later pairing that carries
  // it (torch's segments move, what it does not hold does not).
  World world(518 * mib, 0);
  struct Missing final : DriverSource {
    World& world;
    explicit Missing(World& w) : world(w) {}
    std::optional<uint64_t> process_bytes(std::size_t d) override { return world.process_bytes(d); }
    std::optional<uint64_t> allocation_bytes(std::size_t d) override {
      return *world.allocation_bytes(d) - 8 * mib;
    }
  } missing(world);
  world.segment_alloc(10 * ms, 256 * mib, 1 * ms);
  world.segment_alloc(2500 * ms, 256 * mib, 1 * ms);
  DriverPairing pairing({&world.counters}, missing);
  int settled = 0;
  int64_t now = 0;
  std::optional<int64_t> last_paired;
  while (now < 6000 * ms) {
    world.run_until(now);
    now = pairing.advance(now, now);
    const std::optional<DriverBreakdown> b = pairing.breakdown(0);
    if (!b || b->paired_ns == last_paired) continue;
    last_paired = b->paired_ns;
    ++settled;
    EXPECT_EQ(b->other_bytes, 0U) << "at " << b->paired_ns;
    EXPECT_EQ(b->excess_bytes, 8 * mib) << "at " << b->paired_ns;
    EXPECT_EQ(b->context_bytes, 518 * mib) << "at " << b->paired_ns;
  }
  EXPECT_GE(settled, 10);
  EXPECT_LE(world.listings, 2) << "the later pairings carried the listing";
}

TEST(DriverPairing, NoDriverNoBreakdown) {
  struct Silent final : DriverSource {
    std::optional<uint64_t> process_bytes(std::size_t) override { return std::nullopt; }
    std::optional<uint64_t> allocation_bytes(std::size_t) override { return 0; }
  } silent;
  DeviceCounters counters;
  DriverPairing pairing({&counters}, silent);
  for (int64_t now = 0; now < 5000 * ms;) now = pairing.advance(now, now);
  EXPECT_FALSE(pairing.breakdown(0).has_value());
}

TEST(DriverPairing, SplitNamesEveryPartAndShowsAnExcess) {
  // driver 3000 = reserved 1000 + NCCL 300 + other 200 + context 1500
  DriverBreakdown b = DriverPairing::split(3000, 1000, 1500, 300);
  EXPECT_EQ(b.nccl_bytes, 300U);
  EXPECT_EQ(b.other_bytes, 200U);
  EXPECT_EQ(b.context_bytes, 1500U);
  EXPECT_EQ(b.excess_bytes, 0U);
  // No listing: the context is what torch and NCCL do not hold, other unknown.
  b = DriverPairing::split(3000, 1000, std::nullopt, std::nullopt);
  EXPECT_FALSE(b.other_bytes.has_value());
  EXPECT_EQ(b.context_bytes, 2000U);
  // The listing exceeds the driver's reading: the parts are cut, the excess named.
  b = DriverPairing::split(3000, 1000, 3500, std::nullopt);
  EXPECT_EQ(b.other_bytes, 2000U);
  EXPECT_EQ(b.context_bytes, 0U);
  EXPECT_EQ(b.excess_bytes, 500U);
  // torch holds more than the listing found: excess, never a negative other.
  b = DriverPairing::split(3000, 1000, 800, std::nullopt);
  EXPECT_EQ(b.other_bytes, 0U);
  EXPECT_EQ(b.excess_bytes, 200U);
}

// Readers refuse a breakdown whose parts cannot be (core/plausible.hpp); whatever the agent
// reads, what split() makes of it is never one of those.
TEST(DriverPairing, EverySplitIsAPlausibleBreakdown) {
  const std::vector<uint64_t> amounts = {0, 1, 300, 1000, 1500, 3000, 4500, 9000};
  std::vector<std::optional<uint64_t>> maybe = {std::nullopt};
  maybe.insert(maybe.end(), amounts.begin(), amounts.end());
  for (const uint64_t driver : amounts) {
    for (const uint64_t reserved : amounts) {
      for (const std::optional<uint64_t>& listed : maybe) {
        for (const std::optional<uint64_t>& nccl : maybe) {
          // A device holds what any of these reads on it.
          const uint64_t total = std::max({driver, reserved, listed.value_or(0), nccl.value_or(0)});
          const DriverBreakdown b = DriverPairing::split(driver, reserved, listed, nccl);
          EXPECT_EQ(implausible_bytes("split", b, total), "")
              << driver << " " << reserved << " " << listed.value_or(99) << " "
              << nccl.value_or(99);
        }
      }
    }
  }
}

TEST(DriverPairing, NcclReportedIsNamedOutOfOther) {
  World world(518 * mib, 600 * mib);
  DriverPairing pairing({&world.counters}, world);
  pairing.set_nccl(0, 22907, 512 * mib);
  std::optional<DriverBreakdown> last;
  drive(world, pairing, 3000 * ms, [&](const DriverBreakdown& b) { last = b; });
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->nccl_bytes, 512 * mib);
  EXPECT_EQ(last->other_bytes, 88 * mib);
  EXPECT_EQ(last->context_bytes, 518 * mib);
  EXPECT_EQ(last->nccl_version, 22907U);
  EXPECT_EQ(last->first_context_bytes, 518 * mib);
}

TEST(DeviceCounters, PrivatePoolSegmentsAreCountedApart) {
  DeviceCounters counters;
  counters.set_pools_tracked(true);
  counters.on_event(Action::SegmentAlloc, 64 * mib);
  counters.on_event(Action::SegmentAlloc, 20 * mib);
  counters.on_private_pool_event(Action::SegmentAlloc, 20 * mib);
  counters.on_private_pool_event(Action::Alloc, 4 * mib);  // a block: reserved does not move
  EXPECT_EQ(counters.reserved_bytes(), 84 * mib);
  EXPECT_EQ(counters.private_pool_bytes(), 20 * mib);
  EXPECT_EQ(counters.segment_event_count(), 2U);
  counters.on_event(Action::SegmentFree, 20 * mib);
  counters.on_private_pool_event(Action::SegmentFree, 20 * mib);
  EXPECT_EQ(counters.private_pool_bytes(), 0U);
  // A pool's segment from before attach: clamped at 0 and counted.
  const uint64_t anomalies = counters.anomaly_count();
  counters.on_private_pool_event(Action::SegmentUnmap, 2 * mib);
  EXPECT_EQ(counters.private_pool_bytes(), 0U);
  EXPECT_EQ(counters.anomaly_count(), anomalies + 1);
}

TEST(AddressWalk, CandidateRangesAreAnonymousOrTheDriversOwn) {
  const std::string maps =
      "55d0c0000000-55d0c0021000 r--p 00000000 08:01 1234 /usr/bin/python3.12\n"
      "7fde02000000-7fde42000000 ---p 00000000 00:00 0 \n"
      "7fde96000000-7fdf04600000 ---p 00000000 00:00 0\n"
      "7fdf10000000-7fdf10200000 rw-s 00000000 00:05 77 /dev/nvidiactl\n"
      "7fdf20000000-7fdf20001000 r-xp 00000000 08:01 99 /usr/lib/libcuda.so.1\n"
      "not a line\n";
  const std::vector<AddressRange> ranges = device_candidate_ranges(maps);
  ASSERT_EQ(ranges.size(), 3U);
  EXPECT_EQ(ranges[0].begin, 0x7fde02000000U);
  EXPECT_EQ(ranges[1].end, 0x7fdf04600000U);
  EXPECT_EQ(ranges[2].begin, 0x7fdf10000000U);
}

TEST(AddressWalk, FindsEveryAllocationOnceAndJumpsOverThem) {
  const uint64_t page = 2 * mib;
  // Allocations: [base, size): a 1 GiB one, a 4-byte one at a page start, one spanning two
  // mappings, and one the keep() refuses (host memory).
  std::map<uint64_t, uint64_t> allocations = {
      {0x100000000, 1024 * mib}, {0x200000000, 4}, {0x300000000, 8 * mib}, {0x400000000, 2 * mib}};
  const std::vector<AddressRange> ranges = {{0x0FFF00000, 0x140000000 + page},
                                            {0x200000000, 0x200400000},
                                            {0x2FFE00000, 0x300400000},
                                            {0x300400000, 0x300A00000},
                                            {0x400000000, 0x400200000}};
  int probes = 0;
  auto probe = [&](uint64_t address, uint64_t* base, uint64_t* size) {
    ++probes;
    auto it = allocations.upper_bound(address);
    if (it == allocations.begin()) return false;
    --it;
    if (address >= it->first + std::max<uint64_t>(it->second, 1)) return false;
    *base = it->first;
    *size = it->second;
    return true;
  };
  auto keep = [](uint64_t base, uint64_t) { return base != 0x400000000; };
  const std::optional<uint64_t> total = walk_allocations(ranges, page, 1'000'000, probe, keep);
  ASSERT_TRUE(total.has_value());
  EXPECT_EQ(*total, 1024 * mib + 4 + 8 * mib);
  // 1 GiB is one probe and a jump, not 512.
  EXPECT_LT(probes, 20);
  EXPECT_FALSE(walk_allocations(ranges, page, 3, probe, keep).has_value());
}

}  // namespace
}  // namespace vramscope::tracking
