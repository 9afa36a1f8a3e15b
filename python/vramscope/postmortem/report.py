# python/vramscope/postmortem/report.py -- the OOM report: text, JSON, memory_viz snapshot, files
"""Renders an ``OomEvidence`` and its ranked advice as the .txt and .json reports and the
memory_viz snapshot, and writes them owner-only (0600), always as new files (see write_report)."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import stat
import time
from collections.abc import Sequence
from typing import Any

from .._core.units import format_bytes
from .advice import Advice, OomEvidence, leak_rate
from .remedies import Assessment, assess

#: Schema version of the .json report (2: leak_rate_bytes, growing_ops, from_exception;
#: 3: growing_modules; 4: the budget and need numbers, advice kinds and parameters,
#: not_advised; 5: measured, measure_note; 6: holders). Documented in docs/json-schema.md.
REPORT_SCHEMA_VERSION = 6


def _table(title: str, rows: Sequence[tuple[str, int]], total: int, limit: int = 8) -> list[str]:
    lines = [title]
    for name, size in list(rows)[:limit]:
        share = f"{size / total:5.1%}" if total > 0 else "    -"
        lines.append(f"  {format_bytes(size):>10}  {share}  {name}")
    return lines


def _named_parts(parts: dict[str, Any]) -> str:
    """"= context 636 MiB + other 64 MiB (NCCL 2.28.9 within), at the last settled pairing"."""
    text = f"= context {format_bytes(int(parts['context_bytes']))}"
    if parts.get("other_bytes") is not None:
        text += f" + other {format_bytes(int(parts['other_bytes']))}"
    if parts.get("nccl_bytes") is not None:
        text += f" + NCCL {format_bytes(int(parts['nccl_bytes']))}"
    elif parts.get("nccl_version"):
        v = int(parts["nccl_version"])
        text += f" (NCCL {v // 10000}.{v // 100 % 100}.{v % 100} within)"
    return text + ", at the last settled pairing"


def _numbers(e: OomEvidence, a: Assessment) -> list[str]:
    """The memory picture at the OOM, in the allocator's terms: free <= budget <= total."""
    cap = (f" (memory-fraction cap {format_bytes(e.limit_bytes)})"
           if e.limit_or_total_bytes != e.device_total_bytes and e.limit_bytes else "")
    non_pytorch = ("unknown (NVML cannot tell)" if e.non_pytorch_bytes is None
                   else f"{format_bytes(e.non_pytorch_bytes)} (this process's CUDA context "
                   "and libraries)")
    others = ("unknown" if e.other_processes_bytes is None
              else format_bytes(e.other_processes_bytes))
    return [
        f"requested        {format_bytes(e.requested_bytes)}",
        f"shortfall        {format_bytes(e.shortfall_bytes)} (needed by the step: "
        + ((f"at least {format_bytes(a.need_bytes)} more than the budget allows; its peak ≥"
            if a.projected_peak_bytes > e.budget_bytes else
            f"at least the {format_bytes(a.need_bytes)} the request lacked; its peak ≥")
           if a.projection_is_lower_bound else f"{format_bytes(a.need_bytes)}; its peak ≈")
        + f"{format_bytes(a.projected_peak_bytes)}, from {a.projection})",
        f"budget           {format_bytes(e.budget_bytes)} for PyTorch{cap}",
        f"free for PyTorch {format_bytes(e.available_bytes)}",
        f"reserved         {format_bytes(e.reserved_bytes)}",
        f"allocated        {format_bytes(e.allocated_bytes)}",
        f"cached free      {format_bytes(e.cached_free_bytes)} (largest block "
        f"{format_bytes(e.largest_free_block_bytes)}, fragmentation {e.fragmentation:.0%})",
        f"device total     {format_bytes(e.device_total_bytes)}",
        f"device free      {format_bytes(e.device_free_bytes)}",
        f"non-PyTorch      {non_pytorch}",
        *([f"                 {_named_parts(e.driver_parts)}"]
          if e.non_pytorch_bytes is not None and e.driver_parts is not None else []),
        f"other processes  {others}",
    ]


def format_report(e: OomEvidence, advice: Sequence[Advice], when: str = "",
                  assessment: Assessment | None = None) -> str:
    """The .txt post-mortem (``assessment``: ``assess(e)``, which a report computes once)."""
    a = assessment if assessment is not None else assess(e)
    lines = [f"vramscope OOM post-mortem: cuda:{e.device}" + (f" at {when}" if when else ""),
             ""] + _numbers(e, a)
    if e.batch_size:
        lines.append(f"batch size       {e.batch_size} (read from the model's input)")
    lines.append("")
    if e.measured is not None:
        m = e.measured
        lines.append(f"measured after the OOM, in this process ({m.seconds:.1f} s; the step run "
                     "again at slices of its batch, no optimizer step):")
        at = f" at {m.what} {m.size}" if m.size else ""
        lines.append(f"  the step{at} needs ≈{format_bytes(m.need_bytes)} of "
                     f"the {format_bytes(e.budget_bytes)} budget ({m.basis})")
        if m.lower_bound:
            lines.append(f"  only a lower bound: {m.lower_bound}")
        for r in m.remedies:
            shown = ", ".join(f"{k} {v}" for k, v in r.params.items()
                              if k not in ("state_bytes", "from_batch_size"))
            lines.append(f"  with {r.kind} ({shown}): ≈{format_bytes(r.need_bytes)}"
                         + ("" if r.ran_where_advised else " (predicted, not run there)"))
        lines += [f"  not measured: {note}" for note in m.notes]
        lines.append("")
    elif e.measure_note:
        lines += [f"not measured after the OOM: {e.measure_note}; `vramscope fit` measures what "
                  "a step needs", ""]
    if e.survived:
        lines += ["(the program went on after this OOM: it was caught, as cuDNN catches a "
                  "workspace that does not fit and tries a smaller one; not the OOM that "
                  "failed it)", ""]
    if e.from_exception:
        lines += ["(the OOM observer did not run: numbers from the exception's message, as "
                  "rounded by torch)", ""]
    if not e.peaks_exact:
        lines += ["(polling mode, no agent: the step peaks below are the highest values "
                  "polled, not exact; vramscope.mode() says why and what to install)", ""]
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
    if e.growing_modules:
        lines += ["live memory growing at every step, by module (innermost forward that "
                  "allocated it):"]
        lines += [f"  +{format_bytes(size):>10}/step  {name}"
                  for name, size in e.growing_modules[:8]]
        lines.append("")
    if e.holders:
        lines.append("tensors kept on the device by the program's containers at the OOM:")
        lines += [f"  {h.describe()}" for h in e.holders]
        lines.append("")
    if e.steps:
        lines.append("recent steps (peak allocated / allocated at end):")
        for s in e.steps[-10:]:
            batch = f"  batch {s.batch_size}" if s.batch_size else ""
            lines.append(f"  step {s.step:>6}  {format_bytes(s.peak_allocated_bytes):>10} / "
                         f"{format_bytes(s.allocated_bytes):>10}{batch}")
        lines.append("")
    fits = any(x.fits for x in advice)
    if fits or not advice:
        lines.append("advice, most useful first:")
    elif any(x.params.get("covers_known_need") for x in advice):
        lines.append("advice (the step's need is only known as a lower bound: none is promised "
                     "to fit; those that cover it first):")
    else:
        lines.append("advice (none covers the need alone; the largest recoveries first):")
    for i, x in enumerate(advice, 1):
        recovers = f" [recovers ≈{format_bytes(x.recovers_bytes)}]" if x.recovers_bytes else ""
        lines.append(f"  {i}. {x.title}{recovers}")
        lines.append(f"     {x.detail}")
    if a.not_advised:
        lines += ["", "not advised:"]
        lines += [f"  - {kind}: {why}" for kind, why in a.not_advised]
    return "\n".join(lines) + "\n"


def format_measured_summary(e: OomEvidence, advice: Sequence[Advice], path: str) -> str:
    """The lines printed to stderr once the failing step was measured again (or could not
    be)."""
    top = advice[0].title if advice else ""
    promised = " (measured to fit)" if advice and advice[0].fits else ""
    if e.measured is not None:
        m = e.measured
        at = f" at {m.what} {m.size}" if m.size else ""
        head = (f"vramscope: measured the failing step again ({m.seconds:.1f} s): it needs "
                f"≈{format_bytes(m.need_bytes)}{at}, the budget is "
                f"{format_bytes(e.budget_bytes)}")
    else:
        head = f"vramscope: the failing step was not measured again: {e.measure_note}"
    return f"{head}\nvramscope: first advice: {top}{promised}\nvramscope: full report: {path}"


def format_summary(e: OomEvidence, advice: Sequence[Advice], path: str) -> str:
    """The few lines printed to stderr."""
    top = advice[0].title if advice else ""
    return (f"vramscope: CUDA out of memory on cuda:{e.device}: requested "
            f"{format_bytes(e.requested_bytes)}, short by {format_bytes(e.shortfall_bytes)}; "
            f"free for PyTorch {format_bytes(e.available_bytes)} of a "
            f"{format_bytes(e.budget_bytes)} budget ({format_bytes(e.device_total_bytes)} "
            f"device), allocated {format_bytes(e.allocated_bytes)}, cached free "
            f"{format_bytes(e.cached_free_bytes)}\n"
            f"vramscope: first advice: {top}\nvramscope: full report: {path}")


def _advice_json(x: Advice) -> dict[str, Any]:
    # The parameters sit beside the kind ({"kind": "batch_size", "batch_size": 24, ...}) so
    # that a script applies the advice without knowing every kind's nesting.
    d = {"kind": x.kind, **x.params}
    d.update(title=x.title, detail=x.detail, score=round(x.score, 4),
             recovers_bytes=x.recovers_bytes, fits=x.fits)
    return d


def report_json(e: OomEvidence, advice: Sequence[Advice],
                assessment: Assessment | None = None) -> dict[str, Any]:
    """The .json post-mortem (schema_version REPORT_SCHEMA_VERSION, sizes in *_bytes;
    ``assessment``: ``assess(e)``, which a report computes once)."""
    a = assessment if assessment is not None else assess(e)
    d = dataclasses.asdict(e)
    d.update(schema_version=REPORT_SCHEMA_VERSION, non_pytorch_bytes=e.non_pytorch_bytes,
             budget_bytes=e.budget_bytes, available_bytes=e.available_bytes,
             outside_bytes=e.outside_bytes, other_processes_bytes=e.other_processes_bytes,
             shortfall_bytes=e.shortfall_bytes, need_bytes=a.need_bytes,
             projected_peak_bytes=a.projected_peak_bytes, projection=a.projection,
             projection_is_lower_bound=a.projection_is_lower_bound,
             fragmentation=round(e.fragmentation, 4), leak_rate_bytes=leak_rate(e.steps),
             advice=[_advice_json(x) for x in advice],
             not_advised=[{"kind": k, "reason": r} for k, r in a.not_advised])
    return d


_VIZ_ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                "segment_map", "segment_unmap", "snapshot", "oom"}


def memory_viz_snapshot(segments: Sequence[dict[str, Any]],
                        events_by_device: Sequence[Sequence[dict[str, Any]]],
                        wall_minus_monotonic_ns: int = 0) -> dict[str, Any]:
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


def report_paths(pid: int, now: float, directory: str | None = None) -> dict[str, str]:
    """Where the report files go: ``<dir>/vramscope-oom-<pid>-<YYYYmmdd-HHMMSS>.{txt,json,pickle}``.

    The names are a first choice: :func:`write_report` never reuses a name that exists and
    updates the dict with the names it used (``-2``, ``-3``... after the time)."""
    directory = directory or os.environ.get("VRAMSCOPE_OOM_DIR") or os.getcwd()
    stamp = time.strftime('%Y%m%d-%H%M%S', time.localtime(now))
    stem = os.path.join(directory, f"vramscope-oom-{pid}-{stamp}")
    return {"txt": stem + ".txt", "json": stem + ".json", "pickle": stem + ".pickle"}


#: Names tried after the first choice before giving up (several reports in one second, or
#: names planted by someone who can write the directory).
_MAX_NAME_ATTEMPTS = 100

# O_EXCL never reuses or follows an existing name (a planted symlink, a 0666 file someone else
# can read, a FIFO: each is "exists", and the next name is tried); O_NONBLOCK means the open can
# never wait, which inside the OOM callback would hang the trainer instead of raising its
# OutOfMemoryError.
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))


def _open_report_dir(directory: str) -> int:
    """Opens the report directory (created 0700 when missing) and refuses one where anybody
    could replace our files; returns its fd. Raises OSError with the reason."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(directory,
                 os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(f"{directory}: not a directory")
        # Without the sticky bit anyone can rename or replace our files there once written
        # (/tmp has it: new O_EXCL files are safe in it).
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            raise PermissionError(f"{directory}: writable by everyone without the sticky bit; "
                                  "set VRAMSCOPE_OOM_DIR to a private directory")
        # The owner of a directory can delete or replace anything in it, whatever its mode
        # (a shared working directory made first by someone else, 1777, 0775 or 0755). Root
        # could anyway; a root directory others can write needs the sticky bit, like /tmp.
        shared = mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX
        if info.st_uid != os.geteuid() and (info.st_uid != 0 or shared):
            raise PermissionError(f"{directory}: belongs to another user (uid {info.st_uid}), "
                                  "who could delete or replace the reports; set "
                                  "VRAMSCOPE_OOM_DIR to a directory of your own")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _candidate_stems(first: str) -> list[str]:
    return [first] + [f"{first}-{n}" for n in range(2, _MAX_NAME_ATTEMPTS + 1)]


def _create_files(dir_fd: int, stem: str, suffixes: Sequence[str]) -> dict[str, int] | None:
    """Creates ``<stem>.<suffix>`` for every suffix, or none of them: None when a name exists."""
    created: dict[str, int] = {}
    try:
        for suffix in suffixes:
            created[suffix] = os.open(f"{stem}.{suffix}", _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
            # The umask may have cleared bits but never adds any; this makes the mode exact.
            os.fchmod(created[suffix], 0o600)
    except FileExistsError:
        _discard(dir_fd, stem, created)
        return None
    except BaseException:
        _discard(dir_fd, stem, created)
        raise
    return created


def _discard(dir_fd: int, stem: str, created: dict[str, int]) -> None:
    for suffix, fd in created.items():
        os.close(fd)
        try:
            os.unlink(f"{stem}.{suffix}", dir_fd=dir_fd)
        except OSError:
            pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_report(e: OomEvidence, paths: dict[str, str], snapshot: dict[str, Any] | None = None,
                 when: str = "") -> list[Advice]:
    """Writes the .txt, .json (and .pickle when given) files (mode 0600); returns the advice.

    Files are always new (O_CREAT | O_EXCL | O_NOFOLLOW, never blocking): when a name exists
    the next one is tried, and ``paths`` is updated with the names written. A directory that
    everyone can write without the sticky bit is refused (OSError)."""
    assessment = assess(e)  # once per report: the advice, the text and the JSON share it
    advice = assessment.advice
    contents = {"txt": format_report(e, advice, when, assessment).encode("utf-8"),
                "json": (json.dumps(report_json(e, advice, assessment), indent=2)
                         + "\n").encode()}
    if snapshot is not None:
        contents["pickle"] = pickle.dumps(snapshot)
    directory = os.path.dirname(paths["txt"]) or "."
    first_stem = os.path.basename(paths["txt"])[:-len(".txt")]
    dir_fd = _open_report_dir(directory)
    try:
        for stem in _candidate_stems(first_stem):
            created = _create_files(dir_fd, stem, list(contents))
            if created is None:
                continue
            try:
                for suffix, fd in created.items():
                    _write_all(fd, contents[suffix])
            except BaseException:
                _discard(dir_fd, stem, created)
                raise
            for fd in created.values():
                os.close(fd)
            for suffix in paths:
                paths[suffix] = os.path.join(directory, f"{stem}.{suffix}")
            return advice
        raise FileExistsError(f"{os.path.join(directory, first_stem)}.txt and "
                              f"{_MAX_NAME_ATTEMPTS - 1} other names exist")
    finally:
        os.close(dir_fd)


def rewrite_report(e: OomEvidence, paths: dict[str, str], when: str = "") -> list[Advice]:
    """Replaces the .txt and .json of a report written before (``paths``, as write_report left
    them) with the report of ``e`` (its measurements added): each written to a new private
    file beside it, then renamed over it, so a reader sees the old report or the new one,
    whole. Returns the advice."""
    assessment = assess(e)
    advice = assessment.advice
    contents = {"txt": format_report(e, advice, when, assessment).encode("utf-8"),
                "json": (json.dumps(report_json(e, advice, assessment), indent=2)
                         + "\n").encode()}
    directory = os.path.dirname(paths["txt"]) or "."
    dir_fd = _open_report_dir(directory)
    try:
        for suffix, data in contents.items():
            final = os.path.basename(paths[suffix])
            for attempt in range(_MAX_NAME_ATTEMPTS):
                temp = f".{final}.{os.getpid()}-{attempt}.tmp"
                try:
                    fd = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
                except FileExistsError:
                    continue
                try:
                    os.fchmod(fd, 0o600)
                    _write_all(fd, data)
                finally:
                    os.close(fd)
                # rename() replaces the name itself, never what a planted link points to.
                os.rename(temp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                break
            else:
                raise FileExistsError(f"{os.path.join(directory, final)}: no free temporary name")
        return advice
    finally:
        os.close(dir_fd)
