# python/vramscope/_core/polling.py -- the fallback reader: torch.cuda.memory_stats, no agent
"""Answers the same calls as the ``vramscope._agent`` extension by polling
``torch.cuda.memory_stats`` (66-140 µs a call instead of well under 1 µs).

Used when the agent cannot be loaded (built for another torch version, not built). Current values
are exact; vramscope's own peaks are the highest values seen at our reads and steps, because
without allocator events nothing sees what happened between two polls. torch's own peaks are
never reset (that would change the user's ``max_memory_allocated()``).

With a ``segment`` (the session's, over the extension: docs/agent-segment.md), every read and
step also publishes what it polled, marked polled and with the reason, so that ``vramscope top``,
the table and ``record`` show this process's numbers as sampled rather than not at all.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any, Protocol

_KEYS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "requested_bytes": "requested_bytes.all.current",
    "active_bytes": "active_bytes.all.current",
    "inactive_split_bytes": "inactive_split_bytes.all.current",
}


class PolledSegment(Protocol):
    """Where a polling reader publishes what it polled (the session's segment)."""

    def publish(self, device: int, counters: dict[str, int]) -> None:
        """``counters`` by the segment's counter names (allocated_bytes ... oom_count)."""

    def set_rank(self, rank: int, world_size: int) -> None:
        """The rank and world size published from now on."""


class PollingReader:
    """Same surface as the agent module, backed by ``torch.cuda.memory_stats``."""

    def __init__(self, torch: ModuleType, reason: str,
                 segment: PolledSegment | None = None) -> None:
        self._torch = torch
        self._mode = f"polling: {reason}"
        self._count = torch.cuda.device_count()
        self._peaks: list[dict[str, int]] = [self._zero_peaks() for _ in range(self._count)]
        self._step_peaks: list[dict[str, int]] = [self._zero_peaks() for _ in range(self._count)]
        #: The last closed step's peaks (what the segment publishes as the step peaks).
        self._last_step_peaks: list[dict[str, int]] = [self._zero_peaks()
                                                       for _ in range(self._count)]
        self._step: list[int] = [0] * self._count
        self._step_start_ns: list[int] = [time.monotonic_ns()] * self._count
        self._ooms: list[int] = [0] * self._count
        self._segment = segment
        # Seen from the start, not from the first read the program makes.
        if segment is not None:
            for device in range(self._count):
                self._read(device)

    @staticmethod
    def _zero_peaks() -> dict[str, int]:
        return {"allocated_bytes": 0, "reserved_bytes": 0, "requested_bytes": 0}

    def _read(self, device: int, publish: bool = True) -> dict[str, int]:
        raw = self._torch.cuda.memory_stats(device)
        now = {name: int(raw.get(key, 0)) for name, key in _KEYS.items()}
        self._ooms[device] = int(raw.get("num_ooms", 0))
        for peaks in (self._peaks[device], self._step_peaks[device]):
            for name in peaks:
                peaks[name] = max(peaks[name], now[name])
        if publish:
            self._publish(device, now)
        return now

    def _publish(self, device: int, now: dict[str, int]) -> None:
        """Hands the segment what the last read of ``device`` polled, with the peaks so far."""
        if self._segment is None:
            return
        counters = dict(now)
        counters.update({
            "peak_allocated_bytes": self._peaks[device]["allocated_bytes"],
            "peak_reserved_bytes": self._peaks[device]["reserved_bytes"],
            "step": self._step[device],
            "step_peak_allocated_bytes": self._last_step_peaks[device]["allocated_bytes"],
            "step_peak_reserved_bytes": self._last_step_peaks[device]["reserved_bytes"],
            "oom_count": self._ooms[device],
        })
        self._segment.publish(device, counters)

    def mode(self) -> str:
        return self._mode

    def device_count(self) -> int:
        return self._count

    def memory_allocated(self, device: int) -> int:
        return self._read(device)["allocated_bytes"]

    def memory_reserved(self, device: int) -> int:
        return self._read(device)["reserved_bytes"]

    def memory_requested(self, device: int) -> int:
        return self._read(device)["requested_bytes"]

    def max_memory_allocated(self, device: int) -> int:
        self._read(device)
        return self._peaks[device]["allocated_bytes"]

    def max_memory_reserved(self, device: int) -> int:
        self._read(device)
        return self._peaks[device]["reserved_bytes"]

    def max_memory_requested(self, device: int) -> int:
        self._read(device)
        return self._peaks[device]["requested_bytes"]

    def reset_peak(self, device: int) -> None:
        self._peaks[device] = self._zero_peaks()
        self._read(device)

    def stats(self, device: int) -> dict[str, int | bool]:
        raw = self._torch.cuda.memory_stats(device)
        out: dict[str, int | bool] = dict(self._read(device))
        out.update({f"peak_{k}": v for k, v in self._peaks[device].items()})
        out.update({f"step_peak_{k}": v for k, v in self._step_peaks[device].items()})
        out["step"] = self._step[device]
        out["oom_count"] = int(raw.get("num_ooms", 0))
        out["polling_only"] = True
        return out

    def step(self) -> list[dict[str, Any]]:
        records = []
        end_ns = time.monotonic_ns()
        for device in range(self._count):
            now = self._read(device, publish=False)
            peaks = self._step_peaks[device]
            self._step[device] += 1
            self._last_step_peaks[device] = dict(peaks)
            records.append({
                "device": device,
                "step": self._step[device],
                "peak_allocated_bytes": peaks["allocated_bytes"],
                "peak_reserved_bytes": peaks["reserved_bytes"],
                "peak_requested_bytes": peaks["requested_bytes"],
                "allocated_bytes": now["allocated_bytes"],
                "reserved_bytes": now["reserved_bytes"],
                "duration_ns": end_ns - self._step_start_ns[device],
                "end_ns": end_ns,
                # Categories need the allocator's events, which polling does not have.
                "categories": None,
                "peaks_exact": False,
            })
            self._step_peaks[device] = dict(
                (k, now[k]) for k in ("allocated_bytes", "reserved_bytes", "requested_bytes"))
            self._step_start_ns[device] = end_ns
            self._publish(device, now)
        return records

    def set_rank(self, rank: int, world_size: int) -> None:
        """Published with the polled numbers when there is a segment."""
        if self._segment is not None:
            self._segment.set_rank(rank, world_size)

    def empty_cache(self) -> int:
        before = sum(self.memory_reserved(d) for d in range(self._count))
        self._torch.cuda.empty_cache()
        after = sum(self.memory_reserved(d) for d in range(self._count))
        return max(0, before - after)

    def last_oom(self) -> dict | None:
        return None
