# python/vramscope/oom.py -- the automatic OOM post-mortem: evidence, ranked advice, report files
"""When the CUDA allocator runs out of memory, vramscope writes ``vramscope-oom-<pid>-<time>.txt``
and ``.json`` (in ``$VRAMSCOPE_OOM_DIR`` or the working directory), a ``.pickle`` snapshot that
``torch.cuda._memory_viz`` and pytorch.org/memory_viz open, and prints a short summary to stderr,
before the ``OutOfMemoryError`` reaches the program.

Everything that decides (fragmentation, advice ranking, text) is a pure function of an
``OomEvidence`` so that it is tested with synthetic numbers; ``collect_evidence`` is the only
part that reads the agent. The post-mortem allocates no GPU memory and bounded host memory.
Environment: ``VRAMSCOPE_OOM_REPORT=0`` disables it; ``VRAMSCOPE_OOM_MAX_REPORTS`` (default 3)
bounds how many one process writes (programs that catch OOMs and retry smaller).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._steps import format_bytes

#: Schema version of the .json report.
REPORT_SCHEMA_VERSION = 1


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
        where = f" (largest holder now: {e.top_ops[0][0]})" if e.top_ops else ""
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


def _table(title: str, rows: Sequence[Tuple[str, int]], total: int, limit: int = 8) -> List[str]:
    lines = [title]
    for name, size in list(rows)[:limit]:
        share = f"{size / total:5.1%}" if total > 0 else "    -"
        lines.append(f"  {format_bytes(size):>10}  {share}  {name}")
    return lines


def format_report(e: OomEvidence, advice: Sequence[Advice], when: str = "") -> str:
    """The .txt post-mortem."""
    lines = [f"vramscope OOM post-mortem: cuda:{e.device}" + (f" at {when}" if when else ""),
             "",
             f"requested        {format_bytes(e.requested_bytes)}",
             f"device total     {format_bytes(e.device_total_bytes)}",
             f"device free      {format_bytes(e.device_free_bytes)}",
             f"allocated        {format_bytes(e.allocated_bytes)}",
             f"cached free      {format_bytes(e.cached_free_bytes)} (largest block "
             f"{format_bytes(e.largest_free_block_bytes)}, fragmentation {e.fragmentation:.0%})",
             f"non-PyTorch      {format_bytes(e.non_pytorch_bytes)}",
             ""]
    if e.top_ops or e.top_modules or e.categories:
        if e.categories:
            cats = sorted(e.categories.items(), key=lambda kv: -kv[1])
            lines += _table("live memory by category:", cats, e.allocated_bytes) + [""]
        if e.top_ops:
            lines += _table("live memory by op (who allocated it):", e.top_ops,
                            e.allocated_bytes) + [""]
        if e.top_modules:
            lines += _table("memory left alive by module forwards:", e.top_modules,
                            e.allocated_bytes) + [""]
    else:
        lines += [e.attribution_note or (
            "no attribution data: wrap the loop in `with vramscope.profile():` (per op and module)"
            " or use vramscope.Monitor(model=model, optimizer=opt) (per category)"), ""]
    if e.steps:
        lines.append("recent steps (peak allocated / allocated at end):")
        for s in e.steps[-10:]:
            batch = f"  batch {s.batch_size}" if s.batch_size else ""
            lines.append(f"  step {s.step:>6}  {format_bytes(s.peak_allocated_bytes):>10} / "
                         f"{format_bytes(s.allocated_bytes):>10}{batch}")
        lines.append("")
    lines.append("advice, most useful first:")
    for i, a in enumerate(advice, 1):
        lines.append(f"  {i}. {a.title}")
        lines.append(f"     {a.detail}")
    return "\n".join(lines) + "\n"


def format_summary(e: OomEvidence, advice: Sequence[Advice], path: str) -> str:
    """The few lines printed to stderr."""
    top = advice[0].title if advice else ""
    return (f"vramscope: CUDA out of memory on cuda:{e.device}: requested "
            f"{format_bytes(e.requested_bytes)}, free {format_bytes(e.device_free_bytes)} of "
            f"{format_bytes(e.device_total_bytes)}, allocated {format_bytes(e.allocated_bytes)}, "
            f"cached free {format_bytes(e.cached_free_bytes)}\n"
            f"vramscope: first advice: {top}\nvramscope: full report: {path}")


def report_json(e: OomEvidence, advice: Sequence[Advice]) -> Dict[str, Any]:
    """The .json post-mortem (schema_version REPORT_SCHEMA_VERSION, sizes in *_bytes)."""
    d = dataclasses.asdict(e)
    d.update(schema_version=REPORT_SCHEMA_VERSION, non_pytorch_bytes=e.non_pytorch_bytes,
             shortfall_bytes=e.shortfall_bytes, fragmentation=round(e.fragmentation, 4),
             advice=[dataclasses.asdict(a) for a in advice])
    return d


_VIZ_ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                "segment_map", "segment_unmap", "snapshot", "oom"}


def memory_viz_snapshot(segments: Sequence[Dict[str, Any]],
                        events_by_device: Sequence[Sequence[Dict[str, Any]]],
                        wall_minus_monotonic_ns: int = 0) -> Dict[str, Any]:
    """A dict in ``torch.cuda.memory._snapshot()`` format from ``_agent.segments()`` and
    ``_agent.recent_events()``: memory_viz's segment and trace views open it."""
    out_segments = []
    for s in segments:
        address = int(s["address"])
        blocks = []
        for size, requested, state in s.get("blocks", ()):
            blocks.append({"address": address, "size": int(size),
                           "requested_size": int(requested), "state": state, "frames": []})
            address += int(size)
        out_segments.append({
            "device": int(s["device"]), "address": int(s["address"]),
            "total_size": int(s["total_size"]), "allocated_size": int(s["allocated_size"]),
            "active_size": int(s["active_size"]), "requested_size": int(s["requested_size"]),
            "stream": int(s["stream"]), "segment_type": "large" if s["is_large"] else "small",
            "segment_pool_id": (0, 0), "is_expandable": bool(s["is_expandable"]),
            "frames": [], "blocks": blocks})
    traces = []
    for events in events_by_device:
        trace = []
        for ev in events:
            if ev["action"] not in _VIZ_ACTIONS:
                continue
            trace.append({"action": ev["action"], "addr": int(ev["address"]),
                          "size": int(ev["size_bytes"]), "stream": 0,
                          "time_us": (int(ev["monotonic_ns"]) + wall_minus_monotonic_ns) // 1000,
                          "frames": [], "compile_context": "", "user_metadata": ""})
        traces.append(trace)
    return {"segments": out_segments, "device_traces": traces, "external_annotations": [],
            "allocator_settings": {}}


def report_paths(pid: int, now: float, directory: Optional[str] = None) -> Dict[str, str]:
    """Where the report files go: ``<dir>/vramscope-oom-<pid>-<YYYYmmdd-HHMMSS>.{txt,json,pickle}``."""
    directory = directory or os.environ.get("VRAMSCOPE_OOM_DIR") or os.getcwd()
    stem = os.path.join(directory, f"vramscope-oom-{pid}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}")
    return {"txt": stem + ".txt", "json": stem + ".json", "pickle": stem + ".pickle"}


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_report(e: OomEvidence, paths: Dict[str, str], snapshot: Optional[Dict[str, Any]] = None,
                 when: str = "") -> List[Advice]:
    """Writes the .txt, .json (and .pickle when given) files (mode 0600); returns the advice."""
    advice = rank_advice(e)
    os.makedirs(os.path.dirname(paths["txt"]) or ".", mode=0o700, exist_ok=True)
    _write_private(paths["txt"], format_report(e, advice, when).encode("utf-8"))
    _write_private(paths["json"], (json.dumps(report_json(e, advice), indent=2) + "\n").encode())
    if snapshot is not None:
        _write_private(paths["pickle"], pickle.dumps(snapshot))
    return advice


# ------------------------------------------------------------------------- live collection
#: Extra evidence providers (Monitor and profile() register themselves): each returns a dict
#: of OomEvidence fields for a device.
_providers: List[Any] = []
_reports_written = 0
_last_report: Dict[str, str] = {}


def add_provider(provider: Any) -> None:
    """Registers ``provider(device) -> dict`` adding evidence (steps, modules, batch size)."""
    if provider not in _providers:
        _providers.append(provider)


def remove_provider(provider: Any) -> None:
    if provider in _providers:
        _providers.remove(provider)


def collect_evidence(agent: Any, device: int) -> OomEvidence:
    """Reads the agent (host-side only: no GPU allocation) after an OOM on ``device``."""
    oom = agent.last_oom() or {}
    stats = agent.stats(device)
    cached_free, largest = fragmentation_of(agent.segments(True), device)
    e = OomEvidence(device=device, requested_bytes=int(oom.get("requested_bytes", 0)),
                    device_total_bytes=int(oom.get("device_total_bytes", 0)),
                    device_free_bytes=int(oom.get("device_free_bytes", 0)),
                    allocated_bytes=int(stats.get("allocated_bytes", 0)),
                    reserved_bytes=int(stats.get("reserved_bytes", 0)),
                    cached_free_bytes=cached_free, largest_free_block_bytes=largest)
    if agent.attribution_summary(device):
        rows = agent.op_table(device, "profile")
        e.top_ops = sorted(((r["name"], int(r["live_bytes"])) for r in rows if r["live_bytes"]),
                           key=lambda t: -t[1])[:10]
        cats = agent.categories(device, "step")
        e.categories = {k: int(v[0]) for k, v in cats.items() if v[0]}
    for provider in list(_providers):
        try:
            for key, value in (provider(device) or {}).items():
                setattr(e, key, value)
        except Exception:  # noqa: BLE001 -- a provider's bug must not hide the report
            pass
    return e


def on_oom(device: int) -> None:
    """The agent's OOM callback: write the post-mortem and print its summary (never raises)."""
    global _reports_written
    try:
        if os.environ.get("VRAMSCOPE_OOM_REPORT", "1").strip() in ("0", "false", "off", "no"):
            return
        limit = int(os.environ.get("VRAMSCOPE_OOM_MAX_REPORTS", "3") or 3)
        if _reports_written >= limit:
            return
        _reports_written += 1
        from . import _agent  # type: ignore[attr-defined]

        e = collect_evidence(_agent, device)
        now = time.time()
        paths = report_paths(os.getpid(), now)
        offset = time.time_ns() - time.monotonic_ns()
        events = [_agent.recent_events(d) for d in range(_agent.device_count())]
        snapshot = memory_viz_snapshot(_agent.segments(True), events, offset)
        advice = write_report(e, paths, snapshot, time.strftime("%Y-%m-%d %H:%M:%S"))
        _last_report.clear()
        _last_report.update(paths)
        print(format_summary(e, advice, paths["txt"]), file=sys.stderr, flush=True)
    except Exception as exc:  # noqa: BLE001 -- never replace the program's OutOfMemoryError
        print(f"vramscope: could not write the OOM report ({exc})", file=sys.stderr, flush=True)


def last_report() -> Dict[str, str]:
    """Paths of the last post-mortem written by this process ({} if none)."""
    return dict(_last_report)


def install(agent: Any) -> None:
    """Makes ``on_oom`` the agent's OOM callback (done at attach)."""
    if hasattr(agent, "set_oom_callback"):
        agent.set_oom_callback(on_oom)
