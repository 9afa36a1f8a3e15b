# python/vramscope/_core/polling.py -- the fallback reader: torch.cuda.memory_stats, no agent
"""Answers the same calls as the ``vramscope._agent`` extension by polling
``torch.cuda.memory_stats`` (66-140 µs a call instead of well under 1 µs).

Used when the agent cannot be loaded (built for another torch version, not built). Current values
are exact; vramscope's own peaks are the highest values seen at our reads and steps, because
without allocator events nothing sees what happened between two polls. torch's own peaks are
never reset (that would change the user's ``max_memory_allocated()``).
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

_KEYS = {
    "allocated_bytes": "allocated_bytes.all.current",
    "reserved_bytes": "reserved_bytes.all.current",
    "requested_bytes": "requested_bytes.all.current",
    "active_bytes": "active_bytes.all.current",
    "inactive_split_bytes": "inactive_split_bytes.all.current",
}


class PollingReader:
    """Same surface as the agent module, backed by ``torch.cuda.memory_stats``."""

    def __init__(self, torch: ModuleType, reason: str) -> None:
        self._torch = torch
        self._mode = f"polling: {reason}"
        self._count = torch.cuda.device_count()
        self._peaks: list[dict[str, int]] = [self._zero_peaks() for _ in range(self._count)]
        self._step_peaks: list[dict[str, int]] = [self._zero_peaks() for _ in range(self._count)]
        self._step: list[int] = [0] * self._count
        self._step_start_ns: list[int] = [time.monotonic_ns()] * self._count

    @staticmethod
    def _zero_peaks() -> dict[str, int]:
        return {"allocated_bytes": 0, "reserved_bytes": 0, "requested_bytes": 0}

    def _read(self, device: int) -> dict[str, int]:
        raw = self._torch.cuda.memory_stats(device)
        now = {name: int(raw.get(key, 0)) for name, key in _KEYS.items()}
        for peaks in (self._peaks[device], self._step_peaks[device]):
            for name in peaks:
                peaks[name] = max(peaks[name], now[name])
        return now

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
            now = self._read(device)
            peaks = self._step_peaks[device]
            self._step[device] += 1
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
        return records

    def set_rank(self, rank: int, world_size: int) -> None:
        """Nothing to publish in polling mode; kept so that callers need not check the mode."""

    def empty_cache(self) -> int:
        before = sum(self.memory_reserved(d) for d in range(self._count))
        self._torch.cuda.empty_cache()
        after = sum(self.memory_reserved(d) for d in range(self._count))
        return max(0, before - after)

    def last_oom(self) -> dict | None:
        return None
