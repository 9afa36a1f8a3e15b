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

import collections
import dataclasses
import json
import os
import pickle
import re
import sys
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from ._steps import format_bytes

#: Schema version of the .json report (2: leak_rate_bytes, growing_ops, from_exception).
REPORT_SCHEMA_VERSION = 2


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
    """(op, bytes per step) of the ops whose live bytes grew at each of the last ``min_steps``
    steps, fastest first; ``snapshots`` are {op: live bytes} at consecutive step ends."""
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
        if e.growing_ops:
            where = "; growing: " + ", ".join(f"{name} +{format_bytes(b)}/step"
                                              for name, b in e.growing_ops[:3])
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
    if e.from_exception:
        lines += ["(the OOM observer did not run: numbers from the exception's message, as "
                  "rounded by torch)", ""]
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
    if e.growing_ops:
        lines += ["live memory growing at every step, by op:"]
        lines += [f"  +{format_bytes(size):>10}/step  {name}" for name, size in e.growing_ops[:8]]
        lines.append("")
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
             leak_rate_bytes=leak_rate(e.steps),
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
#: OOM observer calls so far: a handler that sees no new call knows the observer did not run.
_observer_calls = 0
#: How many step ends (and per-op live snapshots) are kept per device.
STEP_HISTORY = 64
#: Every step closed through vramscope (Monitor, vramscope.run), per device: the step history
#: of the report when no Monitor provides its own.
_steps: Dict[int, Deque[StepPoint]] = {}
#: {op: live bytes} at the last step ends, per device, taken while a profile() runs.
_op_snapshots: Dict[int, Deque[Dict[str, int]]] = {}
_lock = threading.Lock()


def add_provider(provider: Any) -> None:
    """Registers ``provider(device) -> dict`` adding evidence (steps, modules, batch size)."""
    if provider not in _providers:
        _providers.append(provider)


def remove_provider(provider: Any) -> None:
    if provider in _providers:
        _providers.remove(provider)


def record_steps(reader: Any, records: Sequence[Dict[str, Any]]) -> None:
    """Keeps the step ends the reader returned (``_api.step_all`` calls this), and per-op live
    bytes at that moment when per-op profiling is running."""
    with _lock:
        for r in records:
            device = int(r["device"])
            _steps.setdefault(device, collections.deque(maxlen=STEP_HISTORY)).append(
                StepPoint(int(r["step"]), int(r["peak_allocated_bytes"]),
                          int(r["allocated_bytes"])))
    active = getattr(reader, "attribution_active", None)
    if active is None or not active() or not hasattr(reader, "op_table"):
        return
    for r in records:
        device = int(r["device"])
        live = {row["name"]: int(row["live_bytes"]) for row in reader.op_table(device, "profile")
                if row["name"] != "(before)"}
        with _lock:
            _op_snapshots.setdefault(device, collections.deque(maxlen=STEP_HISTORY)).append(live)


def recent_steps(device: int) -> List[StepPoint]:
    """The step ends recorded for ``device``, oldest first."""
    with _lock:
        return list(_steps.get(device, ()))


def _fill(e: OomEvidence, agent: Any, device: int) -> None:
    """Adds attribution (when the agent has it), the step history and the providers' fields."""
    if agent is not None and hasattr(agent, "attribution_summary") and \
            agent.attribution_summary(device):
        rows = agent.op_table(device, "profile")
        e.top_ops = sorted(((r["name"], int(r["live_bytes"])) for r in rows if r["live_bytes"]),
                           key=lambda t: -t[1])[:10]
        cats = agent.categories(device, "step")
        e.categories = {k: int(v[0]) for k, v in cats.items() if v[0]}
    e.steps = recent_steps(device)
    with _lock:
        e.growing_ops = growing_ops(list(_op_snapshots.get(device, ())))
    for provider in list(_providers):
        try:
            for key, value in (provider(device) or {}).items():
                setattr(e, key, value)
        except Exception:  # noqa: BLE001 -- a provider's bug must not hide the report
            pass


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
    _fill(e, agent, device)
    return e


def evidence_from_exception(message: str, reader: Any, device: int) -> OomEvidence:
    """Evidence when the observer did not run: the numbers torch printed in ``message``, the
    reader's counters for what the message lacks, then attribution, steps and providers."""
    parsed = parse_oom_message(message)
    device = parsed.get("device", device)
    stats: Dict[str, Any] = {}
    if reader is not None and ("allocated_bytes" not in parsed or "reserved_bytes" not in parsed):
        stats = dict(reader.stats(device))
    e = OomEvidence(
        device=device, requested_bytes=parsed.get("requested_bytes", 0),
        device_total_bytes=parsed.get("device_total_bytes", 0),
        device_free_bytes=parsed.get("device_free_bytes", 0),
        allocated_bytes=parsed.get("allocated_bytes", int(stats.get("allocated_bytes", 0))),
        reserved_bytes=parsed.get("reserved_bytes", int(stats.get("reserved_bytes", 0))),
        from_exception=True)
    if reader is not None and hasattr(reader, "segments"):
        e.cached_free_bytes, e.largest_free_block_bytes = fragmentation_of(reader.segments(False),
                                                                           device)
    _fill(e, reader, device)
    return e


def _may_write() -> bool:
    """Counts one report against VRAMSCOPE_OOM_MAX_REPORTS; False when disabled or spent."""
    global _reports_written
    if os.environ.get("VRAMSCOPE_OOM_REPORT", "1").strip() in ("0", "false", "off", "no"):
        return False
    limit = int(os.environ.get("VRAMSCOPE_OOM_MAX_REPORTS", "3") or 3)
    if _reports_written >= limit:
        return False
    _reports_written += 1
    return True


def _emit(e: OomEvidence, agent: Any, at_oom: bool) -> Dict[str, str]:
    """Writes the report files (with a memory_viz pickle when the agent is there), prints the
    summary to stderr and returns the paths."""
    now = time.time()
    paths = report_paths(os.getpid(), now)
    snapshot = None
    if agent is not None and hasattr(agent, "segments") and hasattr(agent, "recent_events"):
        offset = time.time_ns() - time.monotonic_ns()
        events = [agent.recent_events(d) for d in range(agent.device_count())]
        snapshot = memory_viz_snapshot(agent.segments(at_oom), events, offset)
    advice = write_report(e, paths, snapshot, time.strftime("%Y-%m-%d %H:%M:%S"))
    if snapshot is None:
        del paths["pickle"]
    _last_report.clear()
    _last_report.update(paths)
    print(format_summary(e, advice, paths["txt"]), file=sys.stderr, flush=True)
    return paths


def on_oom(device: int) -> None:
    """The agent's OOM callback: write the post-mortem and print its summary (never raises)."""
    global _observer_calls
    _observer_calls += 1
    try:
        if not _may_write():
            return
        from . import _agent  # type: ignore[attr-defined]

        _emit(collect_evidence(_agent, device), _agent, at_oom=True)
    except Exception as exc:  # noqa: BLE001 -- never replace the program's OutOfMemoryError
        print(f"vramscope: could not write the OOM report ({exc})", file=sys.stderr, flush=True)


def observer_calls() -> int:
    """How many times the OOM observer ran in this process (mark it before a block of code)."""
    return _observer_calls


def report_exception(exc: BaseException, observer_calls_before: int,
                     device: Optional[int] = None) -> Optional[Dict[str, str]]:
    """For Monitor and ``vramscope run`` when ``exc`` leaves their block: makes sure an OOM has
    its post-mortem. When the observer ran since ``observer_calls_before`` it already wrote the
    report and printed its summary; otherwise (polling mode, an OOM raised outside the caching
    allocator) writes it now from the message and prints the summary. Handles each exception
    once (nested Monitor and run); returns the report's paths, None when none was written.
    Never raises: the caller re-raises ``exc``."""
    if not is_oom_error(exc) or getattr(exc, "_vramscope_oom_handled", False):
        return None
    try:
        setattr(exc, "_vramscope_oom_handled", True)
    except (AttributeError, TypeError):
        pass
    if _observer_calls > observer_calls_before:
        return last_report() or None
    try:
        if not _may_write():
            return None
        from . import _api

        reader = _api._reader
        if device is None:
            device = _api._current() if reader is not None else 0
        e = evidence_from_exception(str(exc), reader, device)
        paths = _emit(e, reader, at_oom=False)
        _note_in_agent(reader, e)
        return paths
    except Exception as err:  # noqa: BLE001 -- never replace the program's exception
        print(f"vramscope: could not write the OOM report ({err})", file=sys.stderr, flush=True)
        return None


def _note_in_agent(reader: Any, e: OomEvidence) -> None:
    """Tells the agent about an OOM its observer did not see, so that the segment (and
    `vramscope record` / `vramscope run --record`) gets its OOM marker."""
    note = getattr(reader, "note_oom", None)
    if note is not None:
        note(e.device, e.requested_bytes, e.device_total_bytes, e.device_free_bytes)


def last_report() -> Dict[str, str]:
    """Paths of the last post-mortem written by this process ({} if none)."""
    return dict(_last_report)


def install(agent: Any) -> None:
    """Makes ``on_oom`` the agent's OOM callback (done at attach)."""
    if hasattr(agent, "set_oom_callback"):
        agent.set_oom_callback(on_oom)
