# python/vramscope/postmortem/oom.py -- the automatic OOM post-mortem: evidence, advice, files
"""When the CUDA allocator runs out of memory, vramscope writes ``vramscope-oom-<pid>-<time>.txt``
and ``.json`` (in ``$VRAMSCOPE_OOM_DIR`` or the working directory), a ``.pickle`` snapshot that
``torch.cuda._memory_viz`` and pytorch.org/memory_viz open, and prints a short summary to stderr,
before the ``OutOfMemoryError`` reaches the program.

Everything that decides (fragmentation, advice ranking, text) is a pure function of an
``OomEvidence`` so that it is tested with synthetic numbers; ``collect_evidence`` (the
observer's) and ``evidence_from_exception`` (an OOM caught by Monitor or ``vramscope run``) are
the only parts that read the session. The post-mortem allocates no GPU memory and bounded host
memory. Environment: ``VRAMSCOPE_OOM_REPORT=0`` disables it; ``VRAMSCOPE_OOM_MAX_REPORTS``
(default 3) bounds how many one process writes (programs that catch OOMs and retry smaller).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from .._core.session import SESSION
from ..attribution.model_probe import frames_of_traceback, oom_frames, stack_evidence
from .advice import (
    OomEvidence,
    StepPoint,
    fragmentation_of,
    growing_ops,
    is_oom_error,
    parse_oom_message,
)
from .report import format_summary, memory_viz_snapshot, report_paths, write_report

# What the package's modules and a program's own evidence providers use; the pure parts
# (advice, rendering) are _oom_advice's, _oom_remedies' and _oom_report's.
__all__ = ["OomEvidence", "StepPoint", "add_provider", "remove_provider", "oom_stack",
           "collect_evidence", "evidence_from_exception", "report_exception", "observer_calls",
           "last_report"]

#: Extra evidence providers (Monitor and profile() register themselves): each returns a dict
#: of OomEvidence fields for a device.
_providers: list[Any] = []
_reports_written = 0
_last_report: dict[str, str] = {}
#: OOM observer calls so far: a handler that sees no new call knows the observer did not run.
_observer_calls = 0


def add_provider(provider: Any) -> None:
    """Registers ``provider(device) -> dict`` adding evidence (steps, modules, batch size)."""
    if provider not in _providers:
        _providers.append(provider)


def remove_provider(provider: Any) -> None:
    if provider in _providers:
        _providers.remove(provider)


#: (frames innermost first, on the main thread?) of the OOM being reported, for providers
#: (Monitor's model probe); set only while a report is collected: frames keep their locals.
_oom_stack: tuple[list[Any], bool] | None = None


def oom_stack() -> tuple[list[Any], bool] | None:
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
    if e.process_driver_bytes is None and agent is not None:
        try:
            e.process_driver_bytes = SESSION.driver_process_bytes(device)
        except Exception:  # noqa: BLE001 -- NVML is optional evidence
            pass
    e.expandable_segments = e.expandable_segments or _alloc_conf_expandable()


def _agent_record(agent: Any, device: int, at_oom: bool) -> dict[str, Any]:
    """The agent's record of an OOM on ``device``: what its observer captured at the OOM
    (``oom_snapshot()``, one call) when ``at_oom`` and it has one for that device, else the same
    record read now (segments as captured at the last OOM when ``at_oom``)."""
    if at_oom:
        snapshot = agent.oom_snapshot()
        if snapshot is not None and snapshot["device"] == device:
            return dict(snapshot)
    attributed = bool(agent.attribution_summary(device))
    return {"device": device, "oom": agent.last_oom() or {}, "stats": agent.stats(device),
            "segments": agent.segments(at_oom),
            "recent_events": [agent.recent_events(d) for d in range(agent.device_count())],
            "ops": agent.op_table(device, "profile") if attributed else None,
            "categories": agent.categories(device, "step") if attributed else None}


def _fill(e: OomEvidence, agent: Any, device: int,
          stack: tuple[list[Any], bool] | None = None,
          snapshot: dict[str, Any] | None = None) -> None:
    """Adds the device facts, attribution (from ``snapshot``, the agent's record; None in
    polling mode), the step history, what the stack at the OOM says (batch size, phase) and the
    providers' fields."""
    global _oom_stack
    _device_facts(e, agent, device)
    if snapshot is not None and snapshot["ops"] is not None:
        e.top_ops = sorted(((r["name"], int(r["live_bytes"])) for r in snapshot["ops"]
                            if r["live_bytes"]), key=lambda t: -t[1])[:10]
        e.categories = {k: int(v[0]) for k, v in (snapshot["categories"] or {}).items() if v[0]}
    e.steps = SESSION.history.steps(device)
    e.growing_ops = growing_ops(SESSION.history.op_snapshots(device))
    e.growing_modules = growing_ops(SESSION.history.module_snapshots(device))
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


def collect_evidence(device: int, stack: tuple[list[Any], bool] | None = None,
                     snapshot: dict[str, Any] | None = None) -> OomEvidence:
    """The evidence of an OOM the observer saw on ``device``, from the agent's ``snapshot``
    (_agent_record(at_oom=True) when not given; host-side only: no GPU allocation);
    ``stack``: the OOM thread's frames (innermost first) and whether it is the main thread.
    Needs the agent (the observer that calls this is the agent's)."""
    agent = SESSION.agent
    if snapshot is None:
        snapshot = _agent_record(agent, device, at_oom=True)
    oom, stats, segments = snapshot["oom"], snapshot["stats"], snapshot["segments"]
    cached_free, largest = fragmentation_of(segments, device)
    e = OomEvidence(device=device, requested_bytes=int(oom.get("requested_bytes", 0)),
                    device_total_bytes=int(oom.get("device_total_bytes", 0)),
                    device_free_bytes=int(oom.get("device_free_bytes", 0)),
                    allocated_bytes=int(stats.get("allocated_bytes", 0)),
                    reserved_bytes=int(stats.get("reserved_bytes", 0)),
                    cached_free_bytes=cached_free, largest_free_block_bytes=largest,
                    expandable_segments=any(s.get("is_expandable") for s in segments
                                            if int(s.get("device", 0)) == device))
    _fill(e, agent, device, stack, snapshot)
    return e


def evidence_from_exception(message: str, device: int,
                            stack: tuple[list[Any], bool] | None = None) -> OomEvidence:
    """Evidence when the observer did not run: the numbers torch printed in ``message``, the
    session reader's counters for what the message lacks, then attribution, steps and providers
    (``stack``: the frames of the exception's traceback, innermost first). An OOM that is not
    the caching allocator's ("CUDA error: out of memory" from a library's cudaMalloc) has
    oom_source "other"."""
    parsed = parse_oom_message(message)
    device = parsed.get("device", device)
    reader, agent = SESSION.reader, SESSION.agent
    stats: dict[str, Any] = {}
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
    snapshot = _agent_record(agent, device, at_oom=False) if agent is not None else None
    if snapshot is not None:
        e.cached_free_bytes, e.largest_free_block_bytes = fragmentation_of(snapshot["segments"],
                                                                           device)
    _fill(e, agent, device, stack, snapshot)
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


def _emit(e: OomEvidence, record: dict[str, Any] | None) -> dict[str, str]:
    """Writes the report files (with a memory_viz pickle from ``record``, the agent's
    _agent_record(), when the C++ agent is there), prints the summary to stderr and returns the
    paths."""
    now = time.time()
    paths = report_paths(os.getpid(), now)
    snapshot = None
    if record is not None:
        offset = time.time_ns() - time.monotonic_ns()
        snapshot = memory_viz_snapshot(record["segments"], record["recent_events"], offset)
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
        agent = SESSION.agent
        if agent is None or not _may_write():
            return
        record = _agent_record(agent, device, at_oom=True)
        _emit(collect_evidence(device, oom_frames(), record), record)
    except Exception as exc:  # noqa: BLE001 -- never replace the program's OutOfMemoryError
        print(f"vramscope: could not write the OOM report ({exc})", file=sys.stderr, flush=True)


def observer_calls() -> int:
    """How many times the OOM observer ran in this process (mark it before a block of code)."""
    return _observer_calls


def report_exception(exc: BaseException, observer_calls_before: int,
                     device: int | None = None) -> dict[str, str] | None:
    """For Monitor and ``vramscope run`` when ``exc`` leaves their block: makes sure an OOM has
    its post-mortem. When the observer ran since ``observer_calls_before`` it already wrote the
    report and printed its summary; otherwise (polling mode, an OOM raised outside the caching
    allocator) writes it now from the message and prints the summary. Handles each exception
    once (nested Monitor and run); returns the report's paths, None when none was written.
    Never raises: the caller re-raises ``exc``."""
    if not is_oom_error(exc) or getattr(exc, "_vramscope_oom_handled", False):
        return None
    try:
        exc._vramscope_oom_handled = True  # type: ignore[attr-defined]  # our mark on it
    except (AttributeError, TypeError):
        pass
    if _observer_calls > observer_calls_before:
        return last_report() or None
    try:
        if not _may_write():
            return None
        if device is None:
            device = SESSION.current() if SESSION.reader is not None else 0
        stack = (frames_of_traceback(exc.__traceback__),
                 threading.current_thread() is threading.main_thread())
        e = evidence_from_exception(str(exc), device, stack)
        agent = SESSION.agent
        record = _agent_record(agent, e.device, at_oom=False) if agent is not None else None
        paths = _emit(e, record)
        if agent is not None:
            # The segment (and `vramscope record` / `vramscope run --record`) gets its OOM
            # marker for an OOM the observer did not see.
            agent.note_oom(e.device, e.requested_bytes, e.device_total_bytes,
                           e.device_free_bytes)
        return paths
    except Exception as err:  # noqa: BLE001 -- never replace the program's exception
        print(f"vramscope: could not write the OOM report ({err})", file=sys.stderr, flush=True)
        return None


def last_report() -> dict[str, str]:
    """Paths of the last post-mortem written by this process ({} if none)."""
    return dict(_last_report)


def _install(agent: Any) -> None:
    """Makes ``on_oom`` the agent's OOM callback (the session runs this at attach)."""
    agent.set_oom_callback(on_oom)


SESSION.when_attached(_install)
