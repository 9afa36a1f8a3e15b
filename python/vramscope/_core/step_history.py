# python/vramscope/_core/step_history.py -- the last step ends of this process, for the OOM report
"""Every step closed through vramscope (``Monitor``, ``vramscope.run``, the framework
callbacks) ends here, per device: the step history an OOM report shows when no Monitor gives
its own, and, while a ``profile()`` runs, the live bytes per op (and per module, with module
hooks) at each step end, from which the report names what grows at every step (a leak).

It is a store and nothing else: the session owns one (``SESSION.history``) and hands it the
records it closed with the agent (None in polling mode, which has no attribution); the OOM
post-mortem reads it. Bounded: ``STEP_HISTORY`` step ends per device.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["STEP_HISTORY", "StepHistory", "StepPoint"]

#: How many step ends (and per-op and per-module live snapshots) are kept per device.
STEP_HISTORY = 64


@dataclasses.dataclass
class StepPoint:
    """One past step: its peak, its end, and the batch size when known."""

    step: int
    peak_allocated_bytes: int
    allocated_bytes: int
    batch_size: int | None = None
    #: Highest reserved bytes during the step (0: unknown): the cache's overhead over the
    #: allocated peak, which a batch that "fits" must leave room for.
    peak_reserved_bytes: int = 0


def _paths_of(by_id: dict[int, int], paths: dict[int, str]) -> dict[str, int]:
    """{module id: bytes} -> {module path: bytes} (ids the hooks did not name are left out)."""
    out: dict[str, int] = {}
    for module_id, size in by_id.items():
        path = paths.get(int(module_id))
        if path is not None:
            out[path] = out.get(path, 0) + int(size)
    return out


class StepHistory:
    """Step ends and live snapshots per device; thread-safe (steps close on any thread, the OOM
    observer reads on the allocating one)."""

    def __init__(self, limit: int = STEP_HISTORY) -> None:
        self.limit = limit
        self._steps: dict[int, collections.deque[StepPoint]] = {}
        #: {op: live bytes} at the last step ends, per device, taken while a profile() runs.
        self._op_snapshots: dict[int, collections.deque[dict[str, int]]] = {}
        #: {module path: live bytes} at the last step ends, per device, taken while module hooks
        #: run (those of the current hooks only: new hooks start them afresh).
        self._module_snapshots: dict[int, collections.deque[dict[str, int]]] = {}
        #: {module id: path} of the running profile()'s module hooks (None when none runs).
        self._module_paths: dict[int, str] | None = None
        self._lock = threading.Lock()

    def _ring(self, by_device: dict[int, collections.deque[Any]],
              device: int) -> collections.deque[Any]:
        return by_device.setdefault(device, collections.deque(maxlen=self.limit))

    def add_module_paths(self, paths: dict[int, str]) -> None:
        """Says that module hooks are installed (profile()): ``paths`` maps the module ids they
        give the agent to module paths (the hooks keep adding to it). Step ends then also keep
        {module path: live bytes}, for ``OomEvidence.growing_modules``; earlier module
        snapshots are dropped (they were of another profile's modules)."""
        with self._lock:
            self._module_paths = paths
            self._module_snapshots.clear()

    def remove_module_paths(self, paths: dict[int, str]) -> None:
        """Undoes ``add_module_paths(paths)`` (no-op when another map replaced it); the
        snapshots taken stay for a later report."""
        with self._lock:
            if self._module_paths is paths:
                self._module_paths = None

    @property
    def module_paths(self) -> dict[int, str] | None:
        """The module map of the running hooks, None when none run."""
        return self._module_paths

    def record(self, records: Sequence[dict[str, Any]], agent: Any) -> None:
        """Keeps the step ends the reader returned and, when ``agent`` (the C++ agent, None in
        polling mode) has attribution running, the per-op (and, with module hooks, per-module)
        live bytes at that moment."""
        with self._lock:
            for r in records:
                self._ring(self._steps, int(r["device"])).append(
                    StepPoint(int(r["step"]), int(r["peak_allocated_bytes"]),
                              int(r["allocated_bytes"]),
                              peak_reserved_bytes=int(r.get("peak_reserved_bytes", 0))))
            paths = self._module_paths
        if agent is None or not agent.attribution_active():
            return
        for r in records:
            device = int(r["device"])
            live, by_id = agent.live_by_owner(device)
            modules = _paths_of(by_id, paths) if paths is not None else None
            with self._lock:
                self._ring(self._op_snapshots, device).append(live)
                if modules is not None:
                    self._ring(self._module_snapshots, device).append(modules)

    def steps(self, device: int) -> list[StepPoint]:
        """The step ends recorded for ``device``, oldest first."""
        with self._lock:
            return list(self._steps.get(device, ()))

    def op_snapshots(self, device: int) -> list[dict[str, int]]:
        """{op: live bytes} at the kept step ends of ``device`` (profiling only), oldest first."""
        with self._lock:
            return list(self._op_snapshots.get(device, ()))

    def module_snapshots(self, device: int) -> list[dict[str, int]]:
        """{module path: live bytes} at the kept step ends of ``device``, oldest first."""
        with self._lock:
            return list(self._module_snapshots.get(device, ()))
