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
import os
import sys
import threading
import time
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

# The pure parts live in _oom_advice (evidence, advice) and _oom_report (rendering, files); they
# are re-exported here, the module users and tests know.
from ._oom_advice import (Advice, OomEvidence, StepPoint, fit_batch_size, fragmentation_of,
                          growing_ops, growing_text, is_oom_error, leak_rate, parse_oom_message,
                          rank_advice)
from ._model_probe import frames_of_traceback, oom_frames, stack_evidence
from ._oom_remedies import assess
from ._oom_report import (REPORT_SCHEMA_VERSION, format_report, format_summary,
                          memory_viz_snapshot, report_json, report_paths, write_report)

__all__ = ["Advice", "OomEvidence", "StepPoint", "REPORT_SCHEMA_VERSION", "STEP_HISTORY",
           "fit_batch_size", "fragmentation_of", "growing_ops", "growing_text", "is_oom_error",
           "leak_rate", "assess", "oom_stack",
           "parse_oom_message", "rank_advice", "format_report", "format_summary",
           "memory_viz_snapshot", "report_json", "report_paths", "write_report", "add_provider",
           "remove_provider", "add_module_paths", "remove_module_paths", "record_steps",
           "recent_steps", "collect_evidence",
           "evidence_from_exception", "on_oom", "observer_calls", "report_exception",
           "last_report", "install"]

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
#: {module path: live bytes} at the last step ends, per device, taken while a profile() with
#: module hooks runs (the snapshots of its modules only: a new one starts them afresh).
_module_snapshots: Dict[int, Deque[Dict[str, int]]] = {}
#: {module id: path} of the running profile()'s module hooks (None when none runs).
_module_paths: Optional[Dict[int, str]] = None
_lock = threading.Lock()


def add_provider(provider: Any) -> None:
    """Registers ``provider(device) -> dict`` adding evidence (steps, modules, batch size)."""
    if provider not in _providers:
        _providers.append(provider)


def remove_provider(provider: Any) -> None:
    if provider in _providers:
        _providers.remove(provider)


def add_module_paths(paths: Dict[int, str]) -> None:
    """Says that module hooks are installed (profile()): ``paths`` maps the module ids they
    give the agent to module paths (the hooks keep adding to it). Step ends then also keep
    {module path: live bytes}, for ``OomEvidence.growing_modules``; earlier module snapshots
    are dropped (they were of another profile's modules)."""
    global _module_paths
    with _lock:
        _module_paths = paths
        _module_snapshots.clear()


def remove_module_paths(paths: Dict[int, str]) -> None:
    """Undoes ``add_module_paths(paths)`` (no-op when another map replaced it); the snapshots
    taken stay for a later report."""
    global _module_paths
    with _lock:
        if _module_paths is paths:
            _module_paths = None


def _paths_of(by_id: Dict[int, int], paths: Dict[int, str]) -> Dict[str, int]:
    """{module id: bytes} -> {module path: bytes} (ids the hooks did not name are left out)."""
    out: Dict[str, int] = {}
    for module_id, size in by_id.items():
        path = paths.get(int(module_id))
        if path is not None:
            out[path] = out.get(path, 0) + int(size)
    return out


def record_steps(reader: Any, records: Sequence[Dict[str, Any]]) -> None:
    """Keeps the step ends the reader returned (``_api.step_all`` calls this), and per-op (and,
    with module hooks, per-module) live bytes at that moment when profiling is running."""
    with _lock:
        for r in records:
            device = int(r["device"])
            _steps.setdefault(device, collections.deque(maxlen=STEP_HISTORY)).append(
                StepPoint(int(r["step"]), int(r["peak_allocated_bytes"]),
                          int(r["allocated_bytes"]),
                          peak_reserved_bytes=int(r.get("peak_reserved_bytes", 0))))
        paths = _module_paths
    active = getattr(reader, "attribution_active", None)
    if active is None or not active():
        return
    if not hasattr(reader, "live_by_owner"):
        return
    for r in records:
        device = int(r["device"])
        live, by_id = reader.live_by_owner(device)
        modules = _paths_of(by_id, paths) if paths is not None else None
        with _lock:
            _op_snapshots.setdefault(device, collections.deque(maxlen=STEP_HISTORY)).append(live)
            if modules is not None:
                _module_snapshots.setdefault(device,
                                             collections.deque(maxlen=STEP_HISTORY)).append(modules)


def recent_steps(device: int) -> List[StepPoint]:
    """The step ends recorded for ``device``, oldest first."""
    with _lock:
        return list(_steps.get(device, ()))


#: (frames innermost first, on the main thread?) of the OOM being reported, for providers
#: (Monitor's model probe); set only while a report is collected: frames keep their locals.
_oom_stack: Optional[Tuple[List[Any], bool]] = None


def oom_stack() -> Optional[Tuple[List[Any], bool]]:
    """The stack of the OOM being reported (for evidence providers), None outside a report."""
    return _oom_stack


def _alloc_conf_expandable() -> bool:
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        conf = os.environ.get(name, "").replace(" ", "").lower()
        if "expandable_segments:true" in conf:
            return True
    return False


def _device_facts(e: OomEvidence, agent: Any, device: int) -> None:
    """Puts the device's real total in ``device_total_bytes`` and the memory-fraction cap in
    ``limit_bytes``: torch's OOM observer passes the cap as "device_total" when one is set, and
    its message prints the device total and the cap ("12.00 GiB allowed") apart. Adds what the
    driver charges this process (NVML) and whether segments are expandable. Host calls only."""
    torch = sys.modules.get("torch")
    reported_total = e.device_total_bytes
    if torch is not None:
        try:
            # cudaMemGetInfo's total: the one torch's allocator and its cap are computed from.
            total = int(torch.cuda.mem_get_info(device)[1])
            fraction = float(torch.cuda.get_per_process_memory_fraction(device)) \
                if hasattr(torch.cuda, "get_per_process_memory_fraction") else 1.0
        except Exception:  # noqa: BLE001 -- the report keeps what the OOM said
            total, fraction = reported_total, 1.0
        if e.limit_bytes is None:
            if 0 < reported_total < total:
                e.limit_bytes = reported_total  # the observer's "total": torch's exact cap
            elif fraction < 1.0:
                e.limit_bytes = int(fraction * total)
        e.device_total_bytes = total
    lookup = getattr(agent, "driver_process_bytes", None)
    if e.process_driver_bytes is None and lookup is not None and torch is not None:
        try:
            from . import _api

            uuids = _api._device_uuids(torch, max(device + 1, 1))
            used = lookup(uuids[device], os.getpid())
            e.process_driver_bytes = None if used is None else int(used)
        except Exception:  # noqa: BLE001 -- NVML is optional evidence
            pass
    e.expandable_segments = e.expandable_segments or _alloc_conf_expandable()


def _fill(e: OomEvidence, agent: Any, device: int,
          stack: Optional[Tuple[List[Any], bool]] = None) -> None:
    """Adds the device facts, attribution (when the agent has it), the step history, what the
    stack at the OOM says (batch size, phase) and the providers' fields."""
    global _oom_stack
    _device_facts(e, agent, device)
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
        e.growing_modules = growing_ops(list(_module_snapshots.get(device, ())))
    if stack is not None:
        try:
            for key, value in stack_evidence(stack[0], None, stack[1]).items():
                setattr(e, key, value)
        except Exception:  # noqa: BLE001 -- the stack is optional evidence
            pass
    _oom_stack = stack
    try:
        for provider in list(_providers):
            try:
                for key, value in (provider(device) or {}).items():
                    setattr(e, key, value)
            except Exception:  # noqa: BLE001 -- a provider's bug must not hide the report
                pass
    finally:
        _oom_stack = None  # the frames hold the program's tensors


def collect_evidence(agent: Any, device: int,
                     stack: Optional[Tuple[List[Any], bool]] = None) -> OomEvidence:
    """Reads the agent (host-side only: no GPU allocation) after an OOM on ``device``;
    ``stack``: the OOM thread's frames (innermost first) and whether it is the main thread."""
    oom = agent.last_oom() or {}
    stats = agent.stats(device)
    segments = agent.segments(True)
    cached_free, largest = fragmentation_of(segments, device)
    e = OomEvidence(device=device, requested_bytes=int(oom.get("requested_bytes", 0)),
                    device_total_bytes=int(oom.get("device_total_bytes", 0)),
                    device_free_bytes=int(oom.get("device_free_bytes", 0)),
                    allocated_bytes=int(stats.get("allocated_bytes", 0)),
                    reserved_bytes=int(stats.get("reserved_bytes", 0)),
                    cached_free_bytes=cached_free, largest_free_block_bytes=largest,
                    expandable_segments=any(s.get("is_expandable") for s in segments
                                            if int(s.get("device", 0)) == device))
    _fill(e, agent, device, stack)
    return e


def evidence_from_exception(message: str, reader: Any, device: int,
                            stack: Optional[Tuple[List[Any], bool]] = None) -> OomEvidence:
    """Evidence when the observer did not run: the numbers torch printed in ``message``, the
    reader's counters for what the message lacks, then attribution, steps and providers
    (``stack``: the frames of the exception's traceback, innermost first). An OOM that is not
    the caching allocator's ("CUDA error: out of memory" from a library's cudaMalloc) has
    oom_source "other"."""
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
        from_exception=True, limit_bytes=parsed.get("limit_bytes"),
        process_driver_bytes=parsed.get("process_driver_bytes"),
        oom_source="allocator" if "Tried to allocate" in message else "other")
    if reader is not None and hasattr(reader, "segments"):
        e.cached_free_bytes, e.largest_free_block_bytes = fragmentation_of(reader.segments(False),
                                                                           device)
    _fill(e, reader, device, stack)
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

        _emit(collect_evidence(_agent, device, oom_frames()), _agent, at_oom=True)
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
        stack = (frames_of_traceback(exc.__traceback__),
                 threading.current_thread() is threading.main_thread())
        e = evidence_from_exception(str(exc), reader, device, stack)
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
