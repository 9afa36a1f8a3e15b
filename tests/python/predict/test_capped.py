# tests/python/predict/test_capped.py -- the caching allocator simulated under a cap, by hand
"""Synthetic windows whose need under a cap is worked out by hand from the allocator's rules
(c10/cuda/CUDACachingAllocator.cpp): a large request under 10 MiB gets a 20 MiB segment, a
larger one its size rounded up to 2 MiB, a small one (up to 1 MiB) a 2 MiB segment."""

from __future__ import annotations

from vramscope.predict.capped import capped_need
from vramscope.predict.pinned import pinned_peak

MiB = 1 << 20


def ev(action: str, addr: int, size: int, stream: int = 0) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": stream}


def alloc(addr: int, size: int) -> dict:
    return ev("alloc", addr, size)


def free(addr: int, size: int) -> dict:
    return ev("free_completed", addr, size)


def test_a_cached_segment_counts_in_the_replay_but_not_under_a_cap():
    # The unpressured run: X (200 MiB) gets a 200 MiB segment and is freed; Z (300 MiB) does
    # not fit the cached one and gets its own; Y (100 MiB) is served from the cached 200 MiB
    # segment (best fit). The replay counts, when Y lands, Z's 300 + the 200 Y pins = 500.
    events = [ev("segment_alloc", 0, 200 * MiB), alloc(0, 200 * MiB),
              ev("free_requested", 0, 200 * MiB), free(0, 200 * MiB),
              ev("segment_alloc", 1000 * MiB, 300 * MiB), alloc(1000 * MiB, 300 * MiB),
              alloc(0, 100 * MiB), free(0, 100 * MiB), free(1000 * MiB, 300 * MiB)]
    # Under a cap below 500 MiB: Z's segment passes it, the free 200 MiB one is released, Z
    # gets 300; Y finds no free block and gets a segment of its own size: 300 + 100 = 400,
    # the allocated peak (Z and Y live together). Without a cap the simulation, like the real
    # run, keeps 500 MiB.
    need = capped_need([], events)
    assert need.need_bytes == 400 * MiB
    assert (need.allocated_bytes, need.reserved_bytes) == (400 * MiB, 500 * MiB)
    assert need.events == len(events) and need.unknown_frees == 0
    replay = pinned_peak([], iter(events))
    assert replay.pinned_bytes == 500 * MiB
    assert replay.capped_bytes == 400 * MiB


def test_a_large_block_splits_above_1_mib_of_rest_only():
    # 21 MiB gets a 22 MiB segment: the rest, exactly 1 MiB, is not split off, the block
    # handed out is the whole 22 MiB (torch counts it allocated).
    whole = capped_need([], [alloc(0, 21 * MiB)])
    assert (whole.allocated_bytes, whole.need_bytes) == (22 * MiB, 22 * MiB)
    # 21 MiB - 512 gets a 22 MiB segment too, and its rest of 1 MiB + 512 is split off: a
    # large request of exactly that size takes it, no new segment (else a 20 MiB one: 42).
    split = capped_need([], [alloc(0, 21 * MiB - 512), alloc(100 * MiB, MiB + 512)])
    assert (split.allocated_bytes, split.reserved_bytes) == (22 * MiB, 22 * MiB)
    assert split.need_bytes == 22 * MiB


def test_a_small_block_splits_down_to_512_bytes_of_rest():
    # 1 MiB in a new 2 MiB segment: rest 1 MiB, split. 1 MiB - 512 from that rest: rest 512,
    # split. 100 bytes round up to 512 and take that last rest: all in one 2 MiB segment
    # (without the last split, the 100 bytes would need a second one: 4 MiB).
    events = [alloc(0, MiB), alloc(MiB, MiB - 512), alloc(2 * MiB - 512, 100)]
    need = capped_need([], events)
    assert (need.allocated_bytes, need.reserved_bytes, need.need_bytes) == (2 * MiB,) * 3
    # The trace has the requested size; the block is rounded up to 512 bytes.
    assert capped_need([], [alloc(0, 1000)]).allocated_bytes == 1024


def test_the_smallest_free_block_that_fits_serves_a_request():
    # Two cached free segments, 30 and 50 MiB. 25 MiB takes the 30 (the 50 would leave no
    # room for the 45 MiB that follows, which would then need a new 46 MiB segment).
    events = [alloc(0, 30 * MiB), alloc(100 * MiB, 50 * MiB), free(0, 30 * MiB),
              free(100 * MiB, 50 * MiB), alloc(0, 25 * MiB), alloc(100 * MiB, 45 * MiB)]
    need = capped_need([], events)
    assert need.reserved_bytes == need.need_bytes == 80 * MiB


def test_a_freed_block_merges_with_its_free_neighbours():
    # A and B (4 MiB each) split a 20 MiB segment, 12 MiB left free after them. A freed: B is
    # in use, no merge. B freed: it merges with A before it and the 12 after it, and the whole
    # 20 MiB serves C (else C needs a segment of its own: 40).
    events = [alloc(0, 4 * MiB), alloc(4 * MiB, 4 * MiB), free(0, 4 * MiB), free(4 * MiB, 4 * MiB),
              alloc(0, 20 * MiB)]
    need = capped_need([], events)
    assert need.reserved_bytes == need.need_bytes == 20 * MiB


def test_live_blocks_pin_their_segments_above_the_allocated_peak():
    # A (4 MiB) gets a 20 MiB segment, 16 MiB of it left free. B (30 MiB): a segment of 30,
    # freed. C (18 MiB) is served from B's free segment (best fit: 16 is too small), 12 MiB of
    # it left free. D (20 MiB) fits neither rest (16, 12): a new 20 MiB segment, and the two
    # others hold A and C, so nothing can be released: 20 + 30 + 20 = 70 MiB, while at most
    # A + C + D = 42 MiB are allocated (A + B = 34 before).
    events = [alloc(0, 4 * MiB), alloc(100 * MiB, 30 * MiB), free(100 * MiB, 30 * MiB),
              alloc(100 * MiB, 18 * MiB), alloc(200 * MiB, 20 * MiB)]
    need = capped_need([], events)
    assert need.allocated_bytes == 42 * MiB
    assert need.need_bytes == need.reserved_bytes == 70 * MiB


def test_pressure_releases_only_whole_free_segments():
    # A (4 MiB) in a 20 MiB segment (16 free); B (40 MiB) in its own, freed; C (50 MiB) fits
    # no free block. Without a cap: 20 + 40 + 50 = 110 MiB. Under a cap below that the
    # allocator releases B's whole free segment, not A's, split with 16 MiB free: 20 + 50.
    events = [alloc(0, 4 * MiB), alloc(100 * MiB, 40 * MiB), free(100 * MiB, 40 * MiB),
              alloc(200 * MiB, 50 * MiB)]
    need = capped_need([], events)
    assert need.reserved_bytes == 110 * MiB
    assert need.need_bytes == 70 * MiB
    assert need.allocated_bytes == 54 * MiB
    # An empty_cache in the window (torch's segment_free) releases it there, cap or not.
    emptied = capped_need([], events[:3] + [ev("segment_free", 100 * MiB, 40 * MiB)]
                          + events[3:])
    assert emptied.reserved_bytes == emptied.need_bytes == 70 * MiB


def test_a_free_block_of_another_stream_is_not_used():
    # A (4 MiB, stream 1) in a 20 MiB segment, 16 MiB free there. B (4 MiB, stream 2) may not
    # use it: a 20 MiB segment of stream 2. C (4 MiB, stream 1) does: 40 MiB in all, and both
    # segments hold a live block. Tuples as torch's trace is read: (action, size, stream, addr).
    events = [("alloc", 4 * MiB, 1, 0), ("alloc", 4 * MiB, 2, 100 * MiB),
              ("alloc", 4 * MiB, 1, 4 * MiB)]
    need = capped_need([], events)
    assert need.reserved_bytes == need.need_bytes == 40 * MiB
    assert need.allocated_bytes == 12 * MiB


def test_the_snapshot_starts_the_window_and_its_blocks_are_freed_by_address():
    # At the window's start: a 20 MiB segment holding A (4 MiB) with 16 free, and a cached free
    # 100 MiB segment; 5 MiB allocated elsewhere. Under a cap the cached one is released.
    segments = [{"address": 1000 * MiB, "total_size": 20 * MiB, "stream": 0,
                 "segment_type": "large",
                 "blocks": [{"address": 1000 * MiB, "size": 4 * MiB, "state": "active_allocated"},
                            {"address": 1004 * MiB, "size": 16 * MiB, "state": "inactive"}]},
                {"address": 2000 * MiB, "total_size": 100 * MiB, "stream": 0,
                 "blocks": [{"address": 2000 * MiB, "size": 100 * MiB, "state": "inactive"}]}]
    # X (50 MiB, which the real run put in the cached segment): a new 50 MiB segment. A's free
    # makes its segment whole and free again, Y (20 MiB) takes it: 20 + 50 + 5 = 75 MiB. (With
    # A's free unknown, Y would need a segment of its own: 95.) The free of an address never
    # allocated is ignored.
    events = [alloc(2000 * MiB, 50 * MiB), free(1000 * MiB, 4 * MiB), alloc(1000 * MiB, 20 * MiB),
              free(3000 * MiB, 8 * MiB), free(2000 * MiB, 50 * MiB)]
    need = capped_need(segments, events, outside_bytes=5 * MiB)
    assert need.need_bytes == 75 * MiB
    assert need.unknown_frees == 1
    assert need.allocated_bytes == 75 * MiB  # X and Y live together, and the 5 outside
    assert need.reserved_bytes == 125 * MiB  # 20 + 100 + 5 without a cap: X in the cached one
    # A live block of the snapshot must fit: no cap under its segment passes.
    assert capped_need(segments, []).need_bytes == 20 * MiB


def test_under_expandable_segments_the_replay_stands():
    # Expandable segments map pages into one range (segment_map/segment_unmap): not the native
    # allocator the simulation follows, so no simulated need; the replay's pinned peak is read.
    events = [ev("segment_map", 0, 200 * MiB), alloc(0, 200 * MiB), free(0, 200 * MiB),
              ev("segment_unmap", 0, 200 * MiB), ev("segment_map", 0, 100 * MiB),
              alloc(0, 100 * MiB)]
    replay = pinned_peak([], events)
    assert replay.capped_bytes == 0 and replay.pinned_bytes == 200 * MiB
    # The same requests on the native allocator are simulated.
    native = [e if e["action"] not in ("segment_map", "segment_unmap")
              else ev(e["action"].replace("map", "alloc").replace("unalloc", "free"),
                      e["addr"], e["size"]) for e in events]
    assert pinned_peak([], native).capped_bytes == 200 * MiB
