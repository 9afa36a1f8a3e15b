# python/vramscope/_oom_advice.py -- OOM evidence and the advice it supports (pure functions)
"""What the post-mortem knows (``OomEvidence``) and what it concludes (``rank_advice``): pure
functions of the numbers, tested with synthetic evidence. ``vramscope.oom`` collects the evidence
live and ``_oom_report`` renders it."""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._steps import format_bytes


@dataclasses.dataclass
class StepPoint:
    """One past step: its peak, its end, and the batch size when known."""

    step: int
    peak_allocated_bytes: int
    allocated_bytes: int
    batch_size: Optional[int] = None


@dataclasses.dataclass
class OomEvidence:
    """What was known at the OOM. Byte counts are for the failing device."""

    device: int
    requested_bytes: int
    device_total_bytes: int
    device_free_bytes: int
    allocated_bytes: int
    reserved_bytes: int
    #: Inactive blocks in the cache (reserved, not allocated), and the largest of them.
    cached_free_bytes: int = 0
    largest_free_block_bytes: int = 0
    #: (name, live bytes) of the ops / modules holding the most memory, largest first.
    top_ops: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    top_modules: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    #: Live bytes per category (parameters, gradients, optimizer_state, activations, ...).
    categories: Dict[str, int] = dataclasses.field(default_factory=dict)
    #: Recent steps, oldest first.
    steps: List[StepPoint] = dataclasses.field(default_factory=list)
    #: Module classes repeated in the model with their retained forward bytes per instance,
    #: e.g. [("Block", 12, 210e6)] (checkpointing candidates).
    repeated_modules: List[Tuple[str, int, int]] = dataclasses.field(default_factory=list)
    #: The current batch size, when the program told the Monitor.
    batch_size: Optional[int] = None
    world_size: int = 1
    #: Why op/module/category data is missing (shown instead of their tables).
    attribution_note: str = ""
    #: (op, bytes per step) of ops whose live bytes grew at each of the last steps, fastest
    #: first (needs profiling data at step boundaries).
    growing_ops: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    #: (module path, bytes per step) of modules whose live bytes grew at each of the last steps,
    #: fastest first: bytes allocated while the module was the innermost running forward and
    #: still live (a list of outputs, a cache); needs ``vramscope.profile()`` at step boundaries.
    growing_modules: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    #: Were the numbers read from the exception's message (the OOM observer did not run), so
    #: rounded to what torch prints?
    from_exception: bool = False

    @property
    def non_pytorch_bytes(self) -> int:
        """Used on the device but not by this process's allocator (CUDA context, cuBLAS/NCCL
        workspaces, other processes)."""
        return max(0, self.device_total_bytes - self.device_free_bytes - self.reserved_bytes)

    @property
    def shortfall_bytes(self) -> int:
        """How much more the request needed than the device could give."""
        return max(0, self.requested_bytes - self.device_free_bytes - self.largest_free_block_bytes)

    @property
    def fragmentation(self) -> float:
        """1 - largest free block / cached free bytes (0 when nothing is cached free)."""
        if self.cached_free_bytes <= 0:
            return 0.0
        return 1.0 - self.largest_free_block_bytes / self.cached_free_bytes


@dataclasses.dataclass
class Advice:
    """One suggestion; ``score`` orders them (about: fraction of the shortfall it recovers)."""

    score: float
    title: str
    detail: str


def fragmentation_of(segments: Sequence[Dict[str, Any]], device: int) -> Tuple[int, int]:
    """(cached free bytes, largest free block) of ``device`` from ``_agent.segments()`` dicts."""
    total = largest = 0
    for segment in segments:
        if int(segment.get("device", 0)) != device:
            continue
        for size, _requested, state in segment.get("blocks", ()):
            if state == "inactive":
                total += int(size)
                largest = max(largest, int(size))
    return total, largest


def fit_batch_size(steps: Sequence[StepPoint], budget_bytes: int) -> Optional[Tuple[int, int]]:
    """Largest batch whose step peak fits ``budget_bytes``, from a least-squares line through
    (batch size, peak) of steps at two or more batch sizes; returns (batch, bytes per sample)."""
    by_batch: Dict[int, int] = {}
    for s in steps:
        if s.batch_size:
            by_batch[s.batch_size] = max(by_batch.get(s.batch_size, 0), s.peak_allocated_bytes)
    if len(by_batch) < 2:
        return None
    xs, ys = list(by_batch), [by_batch[b] for b in by_batch]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var
    if slope <= 0:
        return None
    intercept = my - slope * mx
    batch = int((budget_bytes - intercept) // slope)
    return (max(batch, 0), int(slope))


def leak_rate(steps: Sequence[StepPoint], min_steps: int = 4) -> Optional[int]:
    """Bytes per step by which step-end allocated memory grew at every one of the last
    ``min_steps`` steps; None when it did not grow at each."""
    tail = list(steps)[-(min_steps + 1):]
    if len(tail) < min_steps + 1:
        return None
    diffs = [b.allocated_bytes - a.allocated_bytes for a, b in zip(tail, tail[1:])]
    if min(diffs) <= 0:
        return None
    return sum(diffs) // len(diffs)


def growing_ops(snapshots: Sequence[Dict[str, int]], min_steps: int = 3) -> List[Tuple[str, int]]:
    """(name, bytes per step) of the ops (or modules) whose live bytes grew at each of the last
    ``min_steps`` steps, fastest first; ``snapshots`` are {name: live bytes} at consecutive step
    ends."""
    tail = list(snapshots)[-(min_steps + 1):]
    if len(tail) < min_steps + 1:
        return []
    out = []
    for name in tail[-1]:
        values = [snap.get(name, 0) for snap in tail]
        diffs = [b - a for a, b in zip(values, values[1:])]
        if min(diffs) > 0:
            out.append((name, sum(diffs) // len(diffs)))
    return sorted(out, key=lambda t: (-t[1], t[0]))


def growing_text(modules: Sequence[Tuple[str, int]], ops: Sequence[Tuple[str, int]],
                 limit: int = 3) -> str:
    """"module a +4.0 MiB/step, module b ...; op aten::cat +4.0 MiB/step" (the ``limit``
    fastest of each; modules first: they say where in the model)."""
    groups = [", ".join(f"{kind} {name} +{format_bytes(b)}/step" for name, b in rows[:limit])
              for kind, rows in (("module", modules), ("op", ops))]
    return "; ".join(g for g in groups if g)


_SIZE_UNITS = {"b": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
               "tib": 1 << 40, "pib": 1 << 50}
_SIZE = r"([0-9]+(?:\.[0-9]+)?) ?(bytes|B|KiB|MiB|GiB|TiB|PiB)"


def _size(match: Optional["re.Match[str]"], group: int = 1) -> Optional[int]:
    if match is None:
        return None
    return int(float(match.group(group)) * _SIZE_UNITS[match.group(group + 1).lower()])


def parse_oom_message(text: str) -> Dict[str, int]:
    """What torch's "CUDA out of memory" message says: device, requested_bytes,
    device_total_bytes, device_free_bytes, allocated_bytes, reserved_bytes (only those present;
    sizes as printed, rounded to 2 decimals of their unit)."""
    out: Dict[str, int] = {}
    found = {
        "requested_bytes": _size(re.search(r"Tried to allocate " + _SIZE, text)),
        # "capacty": the spelling of torch before 2.2.
        "device_total_bytes": _size(re.search(r"total capac[a-z]* of " + _SIZE, text)),
        "device_free_bytes": _size(re.search(r"of which " + _SIZE + r" is free", text)),
        "allocated_bytes": _size(re.search(_SIZE + r" is allocated by PyTorch", text)),
    }
    unallocated = _size(re.search(_SIZE + r" is reserved by PyTorch but unallocated", text))
    if found["allocated_bytes"] is not None and unallocated is not None:
        found["reserved_bytes"] = found["allocated_bytes"] + unallocated
    device = re.search(r"GPU ([0-9]+) has a total capac", text)
    if device is not None:
        out["device"] = int(device.group(1))
    out.update({k: v for k, v in found.items() if v is not None})
    return out


def is_oom_error(exc: BaseException) -> bool:
    """Is ``exc`` a CUDA out-of-memory error (torch.OutOfMemoryError, or a RuntimeError that
    says so)? Does not import torch."""
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    text = str(exc) if isinstance(exc, RuntimeError) else ""
    return "CUDA out of memory" in text or "CUDA error: out of memory" in text


def rank_advice(e: OomEvidence) -> List[Advice]:
    """Every suggestion the evidence supports, most useful first, each with its numbers."""
    need = max(e.shortfall_bytes, 1)
    advice: List[Advice] = []
    budget = e.device_total_bytes - e.non_pytorch_bytes

    # Fragmentation: the cache holds enough free bytes, but no block is big enough.
    if e.cached_free_bytes > 0 and e.largest_free_block_bytes < e.requested_bytes:
        recoverable = min(e.cached_free_bytes, e.requested_bytes)
        fits = e.cached_free_bytes + e.device_free_bytes >= e.requested_bytes
        advice.append(Advice(
            score=100.0 if fits else recoverable / need * max(e.fragmentation, 0.05),
            title="set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            detail=(f"{format_bytes(e.cached_free_bytes)} is free inside the cache but the "
                    f"largest free block is {format_bytes(e.largest_free_block_bytes)} "
                    f"(fragmentation {e.fragmentation:.0%}); "
                    + ("with expandable segments the request would have fit."
                       if fits else "expandable segments would recover part of it."))))

    rate = leak_rate(e.steps)
    if rate is not None:
        grown = e.steps[-1].allocated_bytes - e.steps[0].allocated_bytes
        if e.growing_ops or e.growing_modules:
            where = "; growing: " + growing_text(e.growing_modules, e.growing_ops)
        elif e.top_ops:
            where = f" (largest holder now: {e.top_ops[0][0]})"
        else:
            where = ""
        advice.append(Advice(
            score=3.0 * min(1.0, grown / need) + 0.5,
            title="memory leak: step-end allocated memory grows every step",
            detail=(f"+{format_bytes(rate)} per step over the last {len(e.steps) - 1} steps "
                    f"(+{format_bytes(grown)} in total){where}; look for tensors kept across "
                    "steps (losses appended without .item(), caches, hooks).")))

    peak = max([s.peak_allocated_bytes for s in e.steps] + [e.allocated_bytes + e.requested_bytes])
    activations = e.categories.get("activations", 0)
    if activations > 0 and activations >= 0.3 * peak:
        saves = 0
        names = ""
        if e.repeated_modules:
            name, count, per_instance = max(e.repeated_modules, key=lambda r: r[1] * r[2])
            # A checkpointed block keeps only its input; keep one block's worth for recompute.
            saves = max(0, (count - 1) * per_instance)
            names = f" on the {count} {name} modules"
        else:
            saves = activations // 2
        advice.append(Advice(
            score=saves / need,
            title=f"activation checkpointing{names}",
            detail=(f"activations are {activations / peak:.0%} of the peak "
                    f"({format_bytes(activations)}); torch.utils.checkpoint{names} saves "
                    f"≈{format_bytes(saves)}.")))

    fit = fit_batch_size(e.steps, budget)
    if fit is not None:
        batch, per_sample = fit
        advice.append(Advice(
            score=1.5 if e.batch_size is None or batch < e.batch_size else 0.2,
            title=f"largest batch that fits ≈ {batch}",
            detail=(f"the step peak grows {format_bytes(per_sample)} per sample (fit over "
                    f"{len({s.batch_size for s in e.steps if s.batch_size})} batch sizes); "
                    f"{format_bytes(budget)} is available to PyTorch.")))
    elif e.batch_size and activations > 0:
        per_sample = activations // e.batch_size
        fixed = peak - activations
        if per_sample > 0 and budget > fixed:
            batch = int((budget - fixed) // per_sample)
            advice.append(Advice(
                score=1.2 if batch < e.batch_size else 0.2,
                title=f"largest batch that fits ≈ {batch}",
                detail=(f"≈{format_bytes(per_sample)} of activations per sample, "
                        f"{format_bytes(fixed)} fixed; {format_bytes(budget)} is available.")))

    state = e.categories.get("optimizer_state", 0)
    if state > 0 and state >= 0.3 * max(e.allocated_bytes, 1):
        saves = state * 3 // 4
        advice.append(Advice(
            score=saves / need,
            title="optimizer state dominates: use a lighter optimizer or shard it",
            detail=(f"optimizer state is {format_bytes(state)} "
                    f"({state / max(e.allocated_bytes, 1):.0%} of allocated); 8-bit Adam saves "
                    f"≈{format_bytes(saves)}; ZeRO/FSDP sharding over N GPUs keeps 1/N.")))

    if e.non_pytorch_bytes >= 0.2 * e.device_total_bytes:
        advice.append(Advice(
            score=min(1.0, e.non_pytorch_bytes / need) * 0.8,
            title="much of the GPU is used outside PyTorch's allocator",
            detail=(f"{format_bytes(e.non_pytorch_bytes)} is used by the CUDA context, "
                    "libraries (cuBLAS, NCCL) or other processes; `vramscope` lists them.")))

    if not advice:
        advice.append(Advice(
            score=0.0, title="reduce the batch size or sequence length",
            detail=("no single cause stands out in the evidence; run under vramscope.profile() "
                    "or Monitor(model=..., optimizer=...) to see who holds the memory.")))
    advice.sort(key=lambda a: -a.score)
    return advice
