# tests/python/predict/test_pinned.py -- the pinned peak of synthetic allocator windows
from __future__ import annotations

from vramscope.predict.pinned import pinned_peak

MiB = 1 << 20


def ev(action: str, addr: int, size: int) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": 0}


def test_a_live_small_block_pins_its_whole_segment():
    segments = [{"address": 0, "total_size": 2 * MiB,
                 "blocks": [{"address": 0, "size": 512, "state": "active_allocated"},
                            {"address": 512, "size": 2 * MiB - 512, "state": "inactive"}]},
                {"address": 100 * MiB, "total_size": 20 * MiB,
                 "blocks": [{"address": 100 * MiB, "size": 20 * MiB, "state": "inactive"}]}]
    p = pinned_peak(segments, [])
    assert (p.allocated_bytes, p.pinned_bytes, p.reserved_bytes) == (512, 2 * MiB, 22 * MiB)


def test_a_new_segment_counts_with_the_segments_in_use_at_that_moment():
    segments = [{"address": 0, "total_size": 2 * MiB,
                 "blocks": [{"address": 0, "size": 512, "state": "active_allocated"}]}]
    events = [ev("segment_alloc", 64 * MiB, 40 * MiB), ev("alloc", 64 * MiB, 40 * MiB),
              ev("free_requested", 0, 512), ev("free_completed", 0, 512),
              ev("free_requested", 64 * MiB, 40 * MiB), ev("free_completed", 64 * MiB, 40 * MiB),
              ev("segment_free", 64 * MiB, 40 * MiB)]
    p = pinned_peak(segments, events)
    # The cap is checked when the 40 MiB segment is created: the 2 MiB one still holds a block.
    assert p.pinned_bytes == 42 * MiB
    assert p.allocated_bytes == 40 * MiB + 512
    assert p.reserved_bytes == 42 * MiB
    assert p.final_allocated_bytes == 0 and p.unknown_events == 0


def test_segments_freed_of_their_blocks_are_not_pinned_later():
    events = [ev("segment_alloc", 0, 20 * MiB), ev("alloc", 0, 8 * MiB),
              ev("free_completed", 0, 8 * MiB),
              # The cache keeps the free 20 MiB segment; a new 30 MiB one needs only itself.
              ev("segment_alloc", 64 * MiB, 30 * MiB), ev("alloc", 64 * MiB, 30 * MiB)]
    p = pinned_peak([], events)
    assert p.pinned_bytes == 30 * MiB
    assert p.reserved_bytes == 50 * MiB
    assert p.allocated_bytes == 30 * MiB


def test_a_pending_free_still_pins_until_it_completes():
    events = [ev("segment_alloc", 0, 20 * MiB), ev("alloc", 0, 4 * MiB),
              ev("free_requested", 0, 4 * MiB),
              ev("segment_alloc", 64 * MiB, 30 * MiB), ev("alloc", 64 * MiB, 30 * MiB)]
    assert pinned_peak([], events).pinned_bytes == 50 * MiB


def test_blocks_of_unknown_segments_pin_at_least_their_bytes():
    events = [("alloc", 6 * MiB, 0, 900 * MiB), ("free_completed", 6 * MiB, 0, 900 * MiB)]
    p = pinned_peak([], events, outside_bytes=MiB)
    assert p.unknown_events == 1
    assert p.pinned_bytes == 7 * MiB and p.allocated_bytes == 7 * MiB


def test_an_oom_in_the_window_is_no_block_and_has_no_address():
    # torch's trace entry of an OOM the allocator raised (a probe that ran out and went on)
    # carries device_free in place of addr; the replay goes on past it.
    oom = {"action": "oom", "size": 64 * MiB, "stream": 0, "device_free": 10 * MiB}
    events = [ev("segment_alloc", 0, 20 * MiB), ev("alloc", 0, 8 * MiB), oom,
              ev("free_completed", 0, 8 * MiB)]
    p = pinned_peak([], events)
    assert (p.pinned_bytes, p.allocated_bytes, p.final_allocated_bytes) == (20 * MiB, 8 * MiB, 0)
    assert p.events == 4 and p.unknown_events == 0
