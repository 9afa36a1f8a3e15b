# tests/python/_vram_double.py -- a scripted stand-in for the C++ agent, so GPU-less tests run
"""``FakeAgent`` answers the agent's reading calls (docs/agent-api.md) from counters the test
moves itself (``alloc``/``free``), with peaks kept like the agent's: a global peak restarted by
``reset_peak`` and a step peak restarted by ``step``. ``installed()`` makes it the reader of
the session (``vramscope._core.session``), as an attached agent would be, so the code above the
agent (the pytest plugin, the framework callbacks) runs unchanged without a GPU. It stands in
for the GPU and the extension only: nothing of vramscope's Python is replaced.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable

from vramscope._core.session import SESSION


class FakeAgent:
    """Devices with allocated/reserved counters that tests move by hand."""

    def __init__(self, devices: int = 1, mode: str = "events") -> None:
        self._mode = mode
        self.allocated = [0] * devices
        self.reserved = [0] * devices
        self.peak_allocated = [0] * devices
        self.peak_reserved = [0] * devices
        self.step_peak_allocated = [0] * devices
        self.step_peak_reserved = [0] * devices
        self.steps = 0
        self.rank = (0, 1)
        #: What vramscope's OOM post-mortem hands the agent at attach.
        self.oom_callback: Callable[[int], None] | None = None

    # ----- what tests do
    def alloc(self, n_bytes: int, device: int = 0) -> None:
        """Allocates n_bytes (the cache grows to hold them, in 2 MiB segments)."""
        self.allocated[device] += n_bytes
        segment = 2 << 20
        needed = -(-self.allocated[device] // segment) * segment
        self.reserved[device] = max(self.reserved[device], needed)
        for peaks, now in ((self.peak_allocated, self.allocated), (self.peak_reserved, self.reserved),
                           (self.step_peak_allocated, self.allocated),
                           (self.step_peak_reserved, self.reserved)):
            peaks[device] = max(peaks[device], now[device])

    def free(self, n_bytes: int, device: int = 0) -> None:
        """Frees n_bytes; the cache keeps its segments, as torch's does."""
        self.allocated[device] -= n_bytes

    # ----- the agent's surface
    def mode(self) -> str:
        return self._mode

    def device_count(self) -> int:
        return len(self.allocated)

    def memory_allocated(self, device: int) -> int:
        return self.allocated[device]

    def memory_reserved(self, device: int) -> int:
        return self.reserved[device]

    def memory_requested(self, device: int) -> int:
        return self.allocated[device]

    def max_memory_allocated(self, device: int) -> int:
        return self.peak_allocated[device]

    def max_memory_reserved(self, device: int) -> int:
        return self.peak_reserved[device]

    def max_memory_requested(self, device: int) -> int:
        return self.peak_allocated[device]

    def reset_peak(self, device: int) -> None:
        self.peak_allocated[device] = self.allocated[device]
        self.peak_reserved[device] = self.reserved[device]

    def stats(self, device: int) -> dict[str, Any]:
        return {"allocated_bytes": self.allocated[device], "reserved_bytes": self.reserved[device],
                "peak_allocated_bytes": self.peak_allocated[device], "polling_only": False}

    def step(self) -> list[dict[str, Any]]:
        self.steps += 1
        now = time.monotonic_ns()
        records = []
        for d in range(len(self.allocated)):
            records.append({"device": d, "step": self.steps,
                            "peak_allocated_bytes": self.step_peak_allocated[d],
                            "peak_reserved_bytes": self.step_peak_reserved[d],
                            "peak_requested_bytes": self.step_peak_allocated[d],
                            "allocated_bytes": self.allocated[d],
                            "reserved_bytes": self.reserved[d], "duration_ns": 0,
                            "end_ns": now, "categories": None})
            self.step_peak_allocated[d] = self.allocated[d]
            self.step_peak_reserved[d] = self.reserved[d]
        return records

    def set_rank(self, rank: int, world_size: int) -> None:
        self.rank = (rank, world_size)

    def empty_cache(self) -> int:
        released = 0
        for d in range(len(self.allocated)):
            keep = -(-self.allocated[d] // (2 << 20)) * (2 << 20)
            released += self.reserved[d] - keep
            self.reserved[d] = keep
        return released

    def last_oom(self) -> dict | None:
        return None

    def oom_snapshot(self) -> dict | None:
        return None

    def oom_snapshot_now(self, device: int) -> dict[str, Any]:
        """The agent's snapshot of ``device`` taken now (docs/agent-api.md), from the counters."""
        return {"device": device, "oom": {}, "stats": self.stats(device),
                "driver_process_bytes": None, "driver_breakdown": None,
                "segments": self.segments(), "recent_events": [[] for _ in self.allocated],
                "ops": None, "categories": None}

    # ----- no attribution running, no NVML, no OOM seen: what an idle agent answers
    def attribution_active(self) -> bool:
        return False

    def attribution_summary(self, device: int) -> dict[str, int]:
        return {}

    def driver_process_bytes(self, uuid: str, pid: int) -> int | None:
        return None

    def driver_breakdown(self, device: int) -> dict[str, Any] | None:
        return None  # no driver here: no pairing

    def set_nccl(self, device: int, version: int, nccl_bytes: int | None) -> None:
        pass

    def segments(self, at_oom: bool = False) -> list[dict[str, Any]]:
        return []

    def recent_events(self, device: int) -> list[dict[str, Any]]:
        return []

    def note_oom(self, device: int, requested_bytes: int, device_total_bytes: int,
                 device_free_bytes: int) -> None:
        pass

    def set_oom_callback(self, fn: Callable[[int], None]) -> None:
        self.oom_callback = fn


@contextlib.contextmanager
def installed(reader: Any, is_agent: bool = True, uuids: Sequence[str] = ()) -> Iterator[Any]:
    """Makes ``reader`` the session's (as after a successful attach: the agent when
    ``is_agent``, else a polling reader), then puts the session back as it was."""
    saved = dict(vars(SESSION))
    SESSION.adopt(reader, lambda: 0, is_agent=is_agent, uuids=uuids)
    try:
        yield reader
    finally:
        vars(SESSION).clear()
        vars(SESSION).update(saved)


#: The double the pytester runs of tests/python/test_pytest_plugin.py share with their tests.
DOUBLE: FakeAgent | None = None
