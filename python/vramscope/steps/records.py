# python/vramscope/steps/records.py -- step records, leak detection and their text forms (pure)
"""What ``Monitor`` keeps per training step and how it prints it.

Nothing here reads a GPU: the functions take plain numbers so that they are tested directly
with synthetic values, and ``Monitor`` feeds them what the agent measured.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._core.units import format_bytes, format_delta

#: The memory categories in the order every output lists them (torch's memory-timeline ones).
CATEGORY_NAMES = ("parameters", "gradients", "optimizer_state", "activations", "temporaries",
                  "other")
#: Their compact forms for the step line and the table columns.
_CATEGORY_SHORT = ("params", "grads", "optim", "activ", "temp", "other")


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One device's numbers for one closed training step."""

    #: Step number, counted by the Monitor from 1.
    step: int
    #: CUDA ordinal of the device.
    device: int
    #: Distributed rank of this process (0 when not distributed).
    rank: int
    #: Number of distributed processes (1 when not distributed).
    world_size: int
    #: Bytes allocated to live tensors at the end of the step.
    allocated_bytes: int
    #: Bytes held by the caching allocator at the end of the step.
    reserved_bytes: int
    #: Highest allocated bytes during the step.
    peak_allocated_bytes: int
    #: Highest reserved bytes during the step.
    peak_reserved_bytes: int
    #: Highest requested (unrounded) bytes during the step; equals allocated in polling mode.
    peak_requested_bytes: int
    #: Change of ``allocated_bytes`` since the end of the previous step.
    delta_allocated_bytes: int
    #: Wall time of the step in nanoseconds (0 when unknown).
    duration_ns: int = 0
    #: What the step's peak was made of: requested bytes per category (CATEGORY_NAMES) live at
    #: the moment of the step's requested-bytes peak; None unless ``Monitor(model=...)``.
    categories: dict[str, int] | None = None
    #: What the driver charges this process on the device beyond the allocator's reserved bytes
    #: (CUDA context, cuBLAS/NCCL workspaces, ...), at the end of the step; None when NVML
    #: cannot tell (no driver, MIG, or another pid namespace: NVML lists host pids).
    non_pytorch_bytes: int | None = None
    #: The non-PyTorch bytes part by part, from the agent's last settled pairing of the driver
    #: with the allocator (``vramscope.memory_breakdown``); None when there is none yet. The CUDA
    #: context and its modules; allocations outside torch (other libraries, NCCL's when NCCL
    #: does not report); NCCL's as NCCL reports them; and, of reserved, the private pools' (CUDA
    #: graphs, MemPool).
    context_bytes: int | None = None
    other_bytes: int | None = None
    nccl_bytes: int | None = None
    private_pool_bytes: int | None = None
    #: The batch size of the step: the leading dimension of the model's input at its last
    #: forward (read by one pre-hook on the top-level module); None when unknown.
    batch_size: int | None = None
    #: Are the peaks exact, from every allocator event (the agent)? False in polling mode:
    #: the highest values seen at the polls, which can be far below the real peaks.
    peaks_exact: bool = True

    @classmethod
    def from_agent(cls, raw: Mapping[str, Any], step: int, rank: int, world_size: int,
                   previous_allocated_bytes: int, non_pytorch_bytes: int | None = None,
                   batch_size: int | None = None,
                   breakdown: Mapping[str, Any] | None = None) -> StepRecord:
        """One device's record from the agent's step dict (one of ``SESSION.step_all()``'s),
        with what the agent does not know: the step number and rank, the allocated bytes at
        the end of the previous step, the driver's non-PyTorch bytes, the batch size."""
        allocated = int(raw["allocated_bytes"])
        categories = raw.get("categories")
        return cls(
            step=step, device=int(raw["device"]), rank=rank, world_size=world_size,
            allocated_bytes=allocated, reserved_bytes=int(raw["reserved_bytes"]),
            peak_allocated_bytes=int(raw["peak_allocated_bytes"]),
            peak_reserved_bytes=int(raw["peak_reserved_bytes"]),
            peak_requested_bytes=int(raw["peak_requested_bytes"]),
            delta_allocated_bytes=allocated - previous_allocated_bytes,
            duration_ns=int(raw.get("duration_ns", 0)),
            categories=None if categories is None else
            {name: int(categories.get(name, 0)) for name in CATEGORY_NAMES},
            non_pytorch_bytes=non_pytorch_bytes, batch_size=batch_size,
            peaks_exact=bool(raw.get("peaks_exact", True)), **_parts(breakdown))


def _parts(breakdown: Mapping[str, Any] | None) -> dict[str, int | None]:
    names = ("context_bytes", "other_bytes", "nccl_bytes", "private_pool_bytes")
    if breakdown is None:
        return dict.fromkeys(names)
    return {n: None if breakdown.get(n) is None else int(breakdown[n]) for n in names}


def rank_prefix(rank: int, world_size: int) -> str:
    """``[rank 1] `` under distributed training, empty otherwise."""
    return f"[rank {rank}] " if world_size > 1 else ""


def format_step_line(records: Sequence[StepRecord]) -> str:
    """One compact line for a step across devices, e.g.
    ``step 7 | cuda:0 alloc 1.2 GiB, reserved 2.0 GiB, step peak 1.8 GiB, Δ +12.0 MiB``."""
    if not records:
        return ""
    first = records[0]
    parts = [f"{rank_prefix(first.rank, first.world_size)}step {first.step}"]
    for r in records:
        text = (f"cuda:{r.device} alloc {format_bytes(r.allocated_bytes)}, "
                f"reserved {format_bytes(r.reserved_bytes)}, "
                f"step peak {'' if r.peaks_exact else '≥'}"
                f"{format_bytes(r.peak_allocated_bytes)}, "
                f"Δ {format_delta(r.delta_allocated_bytes)}")
        if r.categories is not None:
            text += "; at peak " + ", ".join(
                f"{short} {format_bytes(r.categories.get(name, 0))}"
                for name, short in zip(CATEGORY_NAMES, _CATEGORY_SHORT))
        parts.append(text)
    line = " | ".join(parts)
    if not all(r.peaks_exact for r in records):
        line += f" ({SAMPLED_NOTE})"
    return line


#: What a peak marked ≥ is (polling mode), with where the fix is said.
SAMPLED_NOTE = ("≥: sampled peaks, not exact: polling mode, vramscope.mode() says why and "
                "what to install")


_TABLE_HEADER = ("step", "device", "allocated", "reserved", "step peak alloc",
                 "step peak reserved", "Δ allocated")


def format_step_table(records: Iterable[StepRecord]) -> str:
    """The per-step table (one row per step and device), right-aligned, ending with a newline.
    When any record has categories, six more columns show what its peak was made of."""
    records = list(records)
    with_categories = any(r.categories is not None for r in records)
    mark = {True: "", False: "≥"}
    header = _TABLE_HEADER + (_CATEGORY_SHORT if with_categories else ())
    rows = [header]
    for r in records:
        row: tuple[str, ...] = (str(r.step), f"cuda:{r.device}", format_bytes(r.allocated_bytes),
               format_bytes(r.reserved_bytes),
               mark[r.peaks_exact] + format_bytes(r.peak_allocated_bytes),
               mark[r.peaks_exact] + format_bytes(r.peak_reserved_bytes),
               format_delta(r.delta_allocated_bytes))
        if with_categories:
            row += tuple("-" if r.categories is None else format_bytes(r.categories.get(name, 0))
                         for name in CATEGORY_NAMES)
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    if not all(r.peaks_exact for r in records):
        lines.append(SAMPLED_NOTE)
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True)
class LeakReport:
    """Allocated memory grew at every one of the last ``steps`` steps."""

    #: CUDA ordinal of the device.
    device: int
    #: Number of consecutive growing steps looked at.
    steps: int
    #: Growth over those steps.
    total_bytes: int

    @property
    def per_step_bytes(self) -> int:
        """Average growth per step."""
        return self.total_bytes // self.steps


def format_leak_warning(report: LeakReport, rank: int = 0, world_size: int = 1) -> str:
    """One line that says where and how fast memory grows."""
    return (f"{rank_prefix(rank, world_size)}vramscope: possible memory leak on "
            f"cuda:{report.device}: "
            f"allocated memory grew at each of the last {report.steps} steps, "
            f"{format_delta(report.per_step_bytes)} per step "
            f"({format_delta(report.total_bytes)} in total)")


class LeakDetector:
    """Flags a device whose step-end allocated bytes rose at each of ``steps`` consecutive steps
    by more than ``threshold_bytes`` in total. Reports once per growing streak; a step that does
    not grow re-arms it, so a slow real leak is reported once rather than at every step."""

    def __init__(self, steps: int = 5, threshold_bytes: int = 1 << 20) -> None:
        if steps < 1:
            raise ValueError("vramscope: leak_steps must be at least 1")
        if threshold_bytes < 0:
            raise ValueError("vramscope: leak_threshold_bytes must not be negative")
        self.steps = steps
        self.threshold_bytes = threshold_bytes
        self._values: dict[int, collections.deque[int]] = {}
        self._reported: dict[int, bool] = {}

    def observe(self, device: int, allocated_bytes: int) -> LeakReport | None:
        """Feeds one step-end value; returns a report when this step completes a leak."""
        values = self._values.setdefault(device, collections.deque(maxlen=self.steps + 1))
        if values and allocated_bytes <= values[-1]:
            values.clear()
            self._reported[device] = False
        values.append(allocated_bytes)
        if len(values) <= self.steps or self._reported.get(device, False):
            return None
        total = values[-1] - values[0]
        if total <= self.threshold_bytes:
            return None
        self._reported[device] = True
        return LeakReport(device=device, steps=self.steps, total_bytes=total)


def history_limit_deque(limit: int) -> collections.deque[StepRecord]:
    """The bounded step history (oldest records are dropped first)."""
    if limit < 1:
        raise ValueError("vramscope: history_limit must be at least 1")
    return collections.deque(maxlen=limit)

