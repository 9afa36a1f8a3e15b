# python/vramscope/predict/pinned.py -- what must fit under a cap: the peak of segments in use
"""The caching allocator under a memory-fraction cap: when a new segment would pass the cap, it
synchronizes, frees every cached segment that holds no live block and retries before it raises
(c10/cuda/CUDACachingAllocator.cpp, ``release_cached_blocks``). So what a step must fit is not
its reserved peak without pressure (the cache keeps free segments it could give back) and not
its allocated peak (a live block pins its whole segment), but, at every moment a segment is
needed, the segments that hold a live block plus the new one, as the allocator lays them out
under that cap.

``pinned_peak`` replays one window of the allocator's events (torch's memory history: action,
address, size) over the segments at its start (torch's snapshot) and returns that peak, the
*pinned* peak, with the allocated peak of the same window. The replay keeps the unpressured
run's segments: a request served there from a cached free segment much larger than itself
(best fit) counts that segment in full, where under a cap it would have been released and a
right-sized one created. So the peaks come with ``capped_bytes``, the need of the same window
with the allocator simulated under a cap (vramscope.predict.capped): that, over the allocated
peak, is the fragmentation allowance the memory model multiplies its allocated prediction by
(vramscope.predict.model). Pure: tested on real traces (tests/data/fit-calibration) and
synthetic events.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from .capped import capped_need, event_field

__all__ = ["PinnedPeak", "pinned_peak"]


@dataclasses.dataclass(frozen=True)
class PinnedPeak:
    """The peaks of one window of allocator events."""

    #: Highest bytes allocated to live blocks (torch's ``allocated_bytes``).
    allocated_bytes: int
    #: Highest bytes of segments holding a live block, counting a segment being created with
    #: them: what must fit when every free segment is released before each new one.
    pinned_bytes: int
    #: Highest reserved bytes (every segment, free or not): the peak without pressure.
    reserved_bytes: int
    #: Events replayed, and those that named a block or segment the replay did not know
    #: (a window that started before the segments given): the peaks are then lower bounds.
    events: int
    unknown_events: int = 0
    #: Bytes allocated to live blocks at the window's end.
    final_allocated_bytes: int = 0
    #: The smallest cap under which the allocator simulated on the same events does not raise
    #: (vramscope.predict.capped): what must fit under a cap. 0: not simulated.
    capped_bytes: int = 0

    @property
    def need_bytes(self) -> int:
        """What must fit under a cap: the simulated need, else (not simulated) the pinned
        peak."""
        return self.capped_bytes or self.pinned_bytes

    @property
    def allowance(self) -> float:
        """Pinned over allocated (>= 1): the replay's share above the allocated peak."""
        return max(1.0, self.pinned_bytes / self.allocated_bytes) if self.allocated_bytes else 1.0


class _Segments:
    """Segments by start address, with the number of live blocks in each."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.size: dict[int, int] = {}
        self.live: dict[int, int] = {}
        #: Bytes of segments that hold at least one live block, and of all segments.
        self.pinned = 0
        self.reserved = 0

    def add(self, address: int, size: int) -> None:
        if address in self.size:
            self.remove(address)
        bisect.insort(self.starts, address)
        self.size[address] = size
        self.live[address] = 0
        self.reserved += size

    def remove(self, address: int) -> bool:
        if address not in self.size:
            return False
        self.starts.pop(bisect.bisect_left(self.starts, address))
        if self.live.pop(address):
            self.pinned -= self.size[address]
        self.reserved -= self.size.pop(address)
        return True

    def of(self, address: int) -> int | None:
        i = bisect.bisect_right(self.starts, address) - 1
        if i < 0:
            return None
        start = self.starts[i]
        return start if address < start + self.size[start] else None

    def pin(self, segment: int, blocks: int) -> None:
        before = self.live[segment]
        self.live[segment] = before + blocks
        if before == 0 and blocks > 0:
            self.pinned += self.size[segment]
        elif before > 0 and before + blocks == 0:
            self.pinned -= self.size[segment]


#: The trace's actions the replay follows. The others carry no block of a segment: "oom" (the
#: allocator raised; it has ``device_free`` in place of ``addr``), "snapshot",
#: "free_requested" (the block stays in use until its free completes), "user_defined".
REPLAYED = frozenset({"segment_alloc", "segment_map", "segment_free", "segment_unmap", "alloc",
                      "free_completed"})


def pinned_peak(segments: Iterable[Mapping[str, Any]], events: Iterable[Any],
                outside_bytes: int = 0) -> PinnedPeak:
    """The peaks of the window that starts with ``segments`` (torch's snapshot of one device:
    ``address``, ``total_size``, ``blocks`` with ``address``, ``size``, ``state``) and goes on
    with ``events`` (torch's device trace: ``action``, ``addr``, ``size``; or tuples
    ``(action, size, stream, addr)``). ``outside_bytes``: allocated bytes that neither the
    segments nor the events show (they were there before the window), counted in every
    peak as pinned. A block in a segment the replay does not know pins its own bytes.
    ``capped_bytes`` is ``capped_need`` of the same inputs (vramscope.predict.capped), 0 under
    expandable segments, which it does not model."""
    segments, events = list(segments), list(events)
    segs = _Segments()
    blocks: dict[int, tuple[int, int | None]] = {}
    allocated = outside_bytes
    for seg in segments:
        start, size = int(seg["address"]), int(seg["total_size"])
        segs.add(start, size)
        for block in seg.get("blocks", ()):
            if str(block.get("state", "")).startswith("active"):
                address = int(block.get("address", start))
                blocks[address] = (int(block["size"]), start)
                allocated += int(block["size"])
                segs.pin(start, 1)
    peak_alloc, peak_pinned = allocated, segs.pinned + outside_bytes
    peak_reserved = segs.reserved + outside_bytes
    count = unknown = orphans = 0
    for event in events:
        count += 1
        action = event_field(event, "action", 0)
        if action not in REPLAYED:
            continue
        size = int(event_field(event, "size", 1))
        address = int(event_field(event, "addr", 3))
        if action == "segment_alloc" or action == "segment_map":
            # The moment a cap is checked: every segment in use, and this one.
            peak_pinned = max(peak_pinned, segs.pinned + orphans + size + outside_bytes)
            if action == "segment_map" and segs.of(address) is not None:
                unknown += 1
                continue
            segs.add(address, size)
            peak_reserved = max(peak_reserved, segs.reserved + outside_bytes)
        elif action == "segment_free" or action == "segment_unmap":
            if not segs.remove(address):
                unknown += 1
        elif action == "alloc":
            segment = segs.of(address)
            if segment is None:
                # In a segment older than the window: it pins at least its own bytes.
                unknown += 1
                orphans += size
            else:
                segs.pin(segment, 1)
            blocks[address] = (size, segment)
            allocated += size
            peak_alloc = max(peak_alloc, allocated)
            peak_pinned = max(peak_pinned, segs.pinned + orphans + outside_bytes)
        elif action == "free_completed":
            known = blocks.pop(address, None)
            if known is None:
                unknown += 1
                continue
            allocated -= known[0]
            if known[1] is None:
                orphans -= known[0]
            elif known[1] in segs.live:
                segs.pin(known[1], -1)
    # The simulation is the native allocator's; expandable segments map and unmap pages of
    # one virtual range instead (segment_map/segment_unmap): for them the replay stands.
    expandable = any(event_field(e, "action", 0) in ("segment_map", "segment_unmap")
                     for e in events)
    return PinnedPeak(peak_alloc, peak_pinned, peak_reserved, count, unknown, allocated,
                      0 if expandable else capped_need(segments, events, outside_bytes).need_bytes)
