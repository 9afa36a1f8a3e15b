# python/vramscope/attribution/profile.py -- `vramscope.profile()`: memory per op, module, category
"""Who uses the memory.

    with vramscope.profile() as p:
        train_step()
    print(p.table(sort_by="peak", row_limit=10))     # per operator, like the profiler's table
    print(p.module_table())                          # per module: left alive, backward peak

Per op (C++): every allocation is charged to the innermost operator running on the allocating
thread (a RecordFunction callback keeps a thread-local op stack; enabled only inside profile()).
Columns: calls, bytes allocated, bytes freed while the op ran ("self" = allocated - freed, the
profiler's self memory), bytes still live at the end, and bytes live at the moment of the peak.
Sizes are requested bytes (the allocator rounds blocks up to 512 B).

Per module (global module hooks, only inside profile()): for each forward call, the bytes
allocated inside it (children included) that are still live when the outermost forward returns:
what autograd keeps for backward plus the outputs, i.e. what activation checkpointing of that
module would save. Matched by address in C++ (src/attribution/module_frames.*). With
``backward=True``, also the peak of live bytes during each module's backward above the live
bytes at its start (for a module whose inputs need no gradient, torch cannot tell when its
backward ends: the window then lasts to the end of the backward pass).

Live bytes per module: what was allocated while the module was the innermost running forward
and is still live now, however long after its forward (``ModuleRow.live_bytes``). At each step
end (Monitor, vramscope.run) the OOM post-mortem keeps them, to name the modules whose live
bytes grow every step (a leak: outputs kept in a list, a growing cache).

Per category: ``CategoryTracker(model, optimizer)`` tags parameter, gradient and optimizer-state
storages at step boundaries; allocations made during forward are activations, those during
backward/optimizer temporaries; breakdowns are live and at the step's peak.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .._core.evidence import ATTRIBUTION, Stack
from .._core.session import SESSION
from .._core.units import format_bytes
from .categories import StorageWalker
from .module_hooks import ModuleRow, _ModuleHooks, format_module_table, repeated_modules

__all__ = ["profile", "Profile", "CategoryTracker", "format_op_table", "OpRow"]

_SORT_KEYS = {"peak": "live_at_peak_bytes", "allocated": "allocated_bytes",
              "live": "live_bytes", "calls": "calls", "self": "self_bytes"}


@dataclasses.dataclass
class OpRow:
    """One operator's memory (summed over the devices asked for)."""

    name: str
    calls: int = 0
    alloc_count: int = 0
    allocated_bytes: int = 0
    self_freed_bytes: int = 0
    live_bytes: int = 0
    live_at_peak_bytes: int = 0

    @property
    def self_bytes(self) -> int:
        """Allocated minus freed while the op ran (torch.profiler's self CUDA memory)."""
        return self.allocated_bytes - self.self_freed_bytes


def merge_rows(rows_by_device: Sequence[Sequence[dict[str, Any]]]) -> list[OpRow]:
    """Sums the agent's per-device rows by op name (calls are per process: not summed)."""
    merged: dict[str, OpRow] = {}
    for rows in rows_by_device:
        for r in rows:
            row = merged.setdefault(r["name"], OpRow(r["name"], calls=int(r["calls"])))
            row.alloc_count += int(r["alloc_count"])
            row.allocated_bytes += int(r["allocated_bytes"])
            row.self_freed_bytes += int(r["self_freed_bytes"])
            row.live_bytes += int(r["live_bytes"])
            row.live_at_peak_bytes += int(r["live_at_peak_bytes"])
    return list(merged.values())


def format_op_table(rows: Sequence[OpRow], peak_bytes: int, sort_by: str = "peak",
                    row_limit: int = 10, title: str = "") -> str:
    """The per-op table, sorted by ``sort_by`` (peak, allocated, live, calls, self)."""
    if sort_by not in _SORT_KEYS:
        raise ValueError(f"vramscope: sort_by must be one of {', '.join(_SORT_KEYS)}")
    key = _SORT_KEYS[sort_by]
    ordered = sorted(rows, key=lambda r: (-getattr(r, key), r.name))
    if row_limit and row_limit > 0:
        ordered = ordered[:row_limit]
    header = ("op", "calls", "allocated", "self", "live at end", "at peak", "% of peak")
    table = [header]
    for r in ordered:
        share = f"{r.live_at_peak_bytes / peak_bytes:.1%}" if peak_bytes > 0 else "-"
        table.append((r.name, str(r.calls), format_bytes(r.allocated_bytes),
                      format_bytes(r.self_bytes), format_bytes(r.live_bytes),
                      format_bytes(r.live_at_peak_bytes), share))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [title] if title else []
    for row in table:
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    lines.append(f"peak {format_bytes(peak_bytes)}")
    return "\n".join(lines) + "\n"


def _agent_or_raise() -> Any:
    SESSION.attach(init_cuda=True)
    if SESSION.agent is None:
        raise RuntimeError("vramscope: profile() needs the C++ agent in events mode "
                           f"(mode: {SESSION.mode()})")
    return SESSION.agent


class Profile:
    """Per-op and per-module memory of the code run inside it (see module docstring)."""

    def __init__(self, sampling: float = 1.0, modules: bool = True,
                 device: int | None = None, backward: bool = False) -> None:
        if not 0.0 < sampling <= 1.0:
            raise ValueError("vramscope: sampling must be in (0, 1]")
        self.sampling = sampling
        self.modules = modules
        self.backward = backward
        self._device = device
        self._agent: Any = None
        self._hooks: _ModuleHooks | None = None
        self._rows: list[list[dict[str, Any]]] = []
        self._module_rows: list[ModuleRow] = []
        self._peaks: list[int] = []
        self._allocated_peaks: list[int] = []
        self._active = False

    def __enter__(self) -> Profile:
        self._agent = _agent_or_raise()
        device = self._device if self._device is not None else SESSION.current()
        self._agent.profile_start(self.sampling)
        if self.modules:
            self._hooks = _ModuleHooks(self._agent, device, frames=True, backward=self.backward)
            self._hooks.install()
            SESSION.history.add_module_paths(self._hooks.paths)
        SESSION.evidence.add(self._oom_evidence, ATTRIBUTION)
        self._active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active = False
        if self._hooks is not None:
            self._hooks.remove()
            SESSION.history.remove_module_paths(self._hooks.paths)
        self._agent.profile_stop()
        SESSION.evidence.remove(self._oom_evidence)
        self._snapshot()

    def _snapshot(self) -> None:
        count = self._agent.device_count()
        self._rows = [list(self._agent.op_table(d, "profile")) for d in range(count)]
        summaries = [self._agent.attribution_summary(d) for d in range(count)]
        self._peaks = [int(s.get("peak_bytes", 0)) for s in summaries]
        self._allocated_peaks = [int(s.get("peak_allocated_bytes", 0)) for s in summaries]
        self._module_rows = self._hooks.rows() if self._hooks is not None else []

    def _oom_evidence(self, device: int, stack: Stack | None) -> dict[str, Any]:
        if self._hooks is None:
            return {}
        rows = self._hooks.rows()
        top = sorted(((r.path, r.max_retained_bytes) for r in rows), key=lambda t: -t[1])[:10]
        return {"top_modules": top, "repeated_modules": repeated_modules(rows, self._hooks.classes)}

    def ops(self, device: int | None = None) -> list[OpRow]:
        """Per-op rows of ``device`` (all devices summed when None)."""
        if self._active:
            self._snapshot()
        rows = self._rows if device is None else [self._rows[device]]
        return merge_rows(rows)

    def peak_bytes(self, device: int | None = None) -> int:
        """Highest live (requested) bytes during the profile (summed over devices when None):
        the peak the op table's "at peak" column is a share of."""
        if self._active:
            self._snapshot()
        return sum(self._peaks) if device is None else self._peaks[device]

    def peak_allocated_bytes(self, device: int | None = None) -> int:
        """Highest allocated bytes during the profile (torch's block sizes, what
        ``torch.cuda.max_memory_allocated()`` measures; exact from events)."""
        if self._active:
            self._snapshot()
        peaks = self._allocated_peaks
        return sum(peaks) if device is None else (peaks[device] if device < len(peaks) else 0)

    def table(self, sort_by: str = "peak", row_limit: int = 10,
              device: int | None = None) -> str:
        """The per-op table (``sort_by``: peak, allocated, live, calls, self)."""
        where = "all devices" if device is None else f"cuda:{device}"
        return format_op_table(self.ops(device), self.peak_bytes(device), sort_by, row_limit,
                               title=f"vramscope per-op memory ({where})")

    def module_rows(self) -> list[ModuleRow]:
        """Per-module rows (forward retention, backward peak) of the profiled device."""
        if self._active:
            self._snapshot()
        return list(self._module_rows)

    def module_table(self, row_limit: int = 40) -> str:
        """Per module, in tree order: forward calls, bytes left alive per call, backward peak."""
        return format_module_table(self.module_rows(), row_limit)


def profile(sampling: float = 1.0, modules: bool = True, device: int | None = None,
            backward: bool = False) -> Profile:
    """Context manager: per-op (and per-module) memory attribution of the code inside.
    ``sampling`` < 1 records that fraction of ops (cheaper; tables become approximate).
    ``backward=True`` also measures each module's backward peak through global full backward
    hooks, which torch forbids on models that modify a module's output in place
    (``ReLU(inplace=True)``: "a view ... is being modified inplace"), hence off by default."""
    return Profile(sampling=sampling, modules=modules, device=device, backward=backward)


class CategoryTracker:
    """Live memory by category (parameters, gradients, optimizer state, activations,
    temporaries, other), now and at each step's peak. Call ``step()`` after each optimizer step,
    or let ``Monitor(model=..., optimizer=...)`` own one: then ``in_step_records`` is on and
    every step record the agent makes (Monitor history, segment, recordings, exports) carries the
    breakdown at the step's peak."""

    def __init__(self, model: Any, optimizer: Any = None, in_step_records: bool = False) -> None:
        self.model = model
        self.optimizer = optimizer
        self._agent = _agent_or_raise()
        self._walker = StorageWalker(model, optimizer)
        self._agent.attribution_acquire()
        self._hooks = _ModuleHooks(self._agent, SESSION.current())  # phases only
        self._hooks.install()
        self._in_step_records = in_step_records
        if in_step_records:
            self._agent.step_categories(True)
        #: What each step() returned, oldest first.
        self.history: list[dict[int, dict[str, tuple[int, int]]]] = []
        SESSION.evidence.add(self._oom_evidence, ATTRIBUTION)

    def tag(self) -> None:
        """Tags the parameter, gradient and optimizer-state storages that are new since the last
        call (see vramscope.attribution.categories for what is cached)."""
        for category, by_device in self._walker.walk().items():
            for device, blocks in by_device.items():
                self._agent.tag(device, category, blocks)

    _tag = tag

    def step(self) -> dict[int, dict[str, tuple[int, int]]]:
        """Tags this step's storages, returns {device: {category: (live, at step peak)}} and
        starts the next step's peak."""
        self._tag()
        out: dict[int, dict[str, tuple[int, int]]] = {}
        for d in range(self._agent.device_count()):
            out[d] = dict(self._agent.categories(d, "step"))
            self._agent.restart_attribution_peak(d, "step")
        self.history.append(out)
        return out

    def _oom_evidence(self, device: int, stack: Stack | None) -> dict[str, Any]:
        self._tag()
        return {"categories": {k: int(v[0]) for k, v in
                               self._agent.categories(device, "step").items() if v[0]}}

    def close(self) -> None:
        self._hooks.remove()
        if self._in_step_records:
            self._agent.step_categories(False)
            self._in_step_records = False
        self._agent.attribution_release()
        SESSION.evidence.remove(self._oom_evidence)
