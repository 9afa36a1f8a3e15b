# python/vramscope/run.py -- `python -m vramscope.run [-m module | script.py] [args]`: no code edit
"""Runs a Python program with the vramscope agent attached and steps closed automatically.

The agent attaches right after the program initialises CUDA; every optimizer step closes a
step; at exit a one-line summary (peaks per device, steps, OOMs) goes to stderr. A CUDA OOM that
ends the program always leaves its post-mortem report (see postmortem/oom.py), then propagates.
The program runs as ``__main__`` with its own ``sys.argv``; its exceptions and exit code are
its own: an uncaught exception prints the traceback from the program's first frame and exits
1, as ``python script.py`` does; a missing script or module is one line and exit 1.

Environment: VRAMSCOPE_RUN_INTERVAL_MS (publish interval of the agent, default 10),
VRAMSCOPE_RUN_QUIET=1 (no summary and no notes).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import NamedTuple

from . import _api
from ._core.session import SESSION
from ._core.units import format_bytes
from .predict.child import ProbeSink, from_env
from .steps.monitor import Monitor

USAGE = """\
usage: python -m vramscope.run [-m module | script.py] [args...]

Runs a PyTorch program with vramscope's allocator agent attached (no code change): exact
allocated/reserved/requested bytes for `vramscope` / `vramscope top`, a step per optimizer step,
and a summary of peaks, steps and OOMs at exit (on stderr).

environment:
  VRAMSCOPE_RUN_INTERVAL_MS  how often the agent publishes its numbers, in ms (default 10)
  VRAMSCOPE_RUN_QUIET        1 to print no summary and no notes"""


class UsageError(Exception):
    """Bad command line or environment; exit code 2 (a missing script or module: 1)."""


class RunOptions(NamedTuple):
    """What to run and how."""

    #: Module name for -m, else None.
    module: str | None
    #: Script path when not -m, else None.
    script: str | None
    #: Arguments passed to the program.
    args: list[str]
    #: Agent publish interval.
    interval_ms: float
    #: No summary and no notes?
    quiet: bool


def parse_args(argv: Sequence[str], env: Mapping[str, str]) -> RunOptions:
    """Parses ``argv`` (without the program name) like ``python`` does: options end at the script
    or at ``-m module``; everything after belongs to the program."""
    if not argv:
        raise UsageError("missing the program to run")
    first = argv[0]
    module = script = None
    if first == "-m":
        if len(argv) < 2:
            raise UsageError("-m needs a module name")
        module, rest = argv[1], list(argv[2:])
    elif first.startswith("-m") and len(first) > 2:
        module, rest = first[2:], list(argv[1:])
    elif first.startswith("-"):
        raise UsageError(f"unknown option {first!r}")
    else:
        script, rest = first, list(argv[1:])
    raw_interval = env.get("VRAMSCOPE_RUN_INTERVAL_MS", "10")
    try:
        interval_ms = float(raw_interval)
    except ValueError:
        interval_ms = -1.0
    if not interval_ms > 0:
        raise UsageError(
            f"VRAMSCOPE_RUN_INTERVAL_MS must be a positive number of ms, got {raw_interval!r}")
    quiet = env.get("VRAMSCOPE_RUN_QUIET", "").strip().lower() in ("1", "true", "yes", "on")
    return RunOptions(module, script, rest, interval_ms, quiet)


class DevicePeak(NamedTuple):
    """One device's line of the summary."""

    device: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    oom_count: int


def format_summary(mode: str, steps: int, peaks: Sequence[DevicePeak]) -> str:
    """The exit summary, e.g. ``vramscope: 120 steps, 0 OOMs | cuda:0 peak allocated 1.2 GiB,
    peak reserved 2.0 GiB (events)``."""
    if not peaks:
        return f"vramscope: {steps} steps; the program did not use CUDA ({mode})"
    ooms = sum(p.oom_count for p in peaks)
    parts = [f"vramscope: {steps} steps, {ooms} OOM{'' if ooms == 1 else 's'}"]
    # Without the agent the peaks are the highest values polled: marked, never passed as exact.
    at_least = "" if mode.startswith("events") else "≥"
    for p in peaks:
        parts.append(f"cuda:{p.device} peak allocated {at_least}"
                     f"{format_bytes(p.peak_allocated_bytes)}, peak reserved {at_least}"
                     f"{format_bytes(p.peak_reserved_bytes)}")
    line = " | ".join(parts) + f" ({mode})"
    if at_least:
        line += ("\nvramscope: ≥ marks sampled peaks, not exact (no agent: the reason above "
                 "says what to install)")
    return line


def _note(quiet: bool, text: str) -> None:
    if not quiet:
        print(f"vramscope run: {text}", file=sys.stderr, flush=True)


def _start_agent(opts: RunOptions) -> tuple[Monitor | None, ProbeSink | None]:
    """Attaches (lazily) and starts the auto-stepping Monitor, with the probe sink of `vramscope
    fit` when this process is one of its probes; (None, None) when there is no GPU."""
    try:
        _api.attach(interval_ms=opts.interval_ms)
        monitor = Monitor(every=0, auto_step=True, exit_table_rows=0)
        monitor.start()
        # Under `vramscope fit`: this process is one probe (its steps' peaks, then exit).
        probe = from_env(os.environ)
        if probe is not None:
            monitor.add_sink(probe)
            # What must fit under a cap, step by step, from torch's memory history.
            import torch

            probe.start_pinned(range(torch.cuda.device_count()))
        return monitor, probe
    except (ImportError, RuntimeError) as e:
        _note(opts.quiet, f"{str(e).removeprefix('vramscope: ')}; running without the agent")
        return None, None


def _summary(monitor) -> str:
    peaks = []
    for device in range(_api.device_count()):
        stats = _api.memory_stats(device)
        peaks.append(DevicePeak(device, _api.max_memory_allocated(device),
                                _api.max_memory_reserved(device),
                                int(stats.get("oom_count", 0))))
    return format_summary(_api.mode(), monitor.steps, peaks)


def _run_program(opts: RunOptions) -> None:
    if opts.module is not None:
        sys.argv = [opts.module, *opts.args]
        runpy.run_module(opts.module, run_name="__main__", alter_sys=True)
    else:
        assert opts.script is not None
        sys.argv = [opts.script, *opts.args]
        # Like `python script.py`: the script's folder comes first on the import path.
        sys.path[0] = os.path.dirname(os.path.abspath(opts.script))
        runpy.run_path(opts.script, run_name="__main__")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point; raises what the program raises (SystemExit included)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(USAGE)
        return
    try:
        opts = parse_args(argv, os.environ)
    except UsageError as e:
        print(f"{USAGE}\n\nvramscope run: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    # Like `python missing.py` / `python -m missing`: one line and exit 1, nothing started.
    if opts.script is not None and not os.path.isfile(opts.script):
        print(f"vramscope run: error: no such file: {opts.script}", file=sys.stderr)
        raise SystemExit(1)
    if opts.module is not None and not _module_exists(opts.module):
        print(f"vramscope run: error: no module named {opts.module}", file=sys.stderr)
        raise SystemExit(1)
    monitor, probe = _start_agent(opts)
    observer_calls = SESSION.postmortem.observer_calls()
    try:
        _run_program(opts)
    except BaseException as e:
        # A CUDA OOM that ends the program gets its post-mortem (the observer's, else one
        # written now, with an OOM marker in the agent's segment), then its step measured
        # again (the program is over: its memory is free to use); it still propagates.
        SESSION.postmortem.report_exception(e, observer_calls)
        # Under `vramscope fit`, the probe's report says so (its parent reads nothing else),
        # written before the post-mortem measures the step again.
        if probe is not None:
            probe.program_failed(e)
        SESSION.postmortem.measure_and_report(e)
        raise
    finally:
        if monitor is not None:
            _finish(monitor, opts.quiet)


def _process_main() -> None:
    """``python -m vramscope.run``: main(), and an exception that ends the program reported as
    ``python script.py`` reports it: the traceback from the program's own first frame (through
    sys.excepthook, so a program's own hook still applies), then exit 1."""
    try:
        main()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as failure:
        tb = _program_traceback(failure.__traceback__)
        if tb is None and isinstance(failure, ImportError):
            # Raised by runpy before any line of the program ran: "No module named
            # pkg.__main__; 'pkg' is a package and cannot be directly executed".
            print(f"vramscope run: error: {failure}", file=sys.stderr)
        else:
            # The default hook prints the exception's own __traceback__: trim that too.
            sys.excepthook(type(failure), failure.with_traceback(tb), tb)
        raise SystemExit(1) from None


def _module_exists(name: str) -> bool:
    """Can ``-m name`` be found (its parent packages are imported to tell, as runpy does)?"""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


#: Files whose frames are vramscope's way into the program, not the program's own.
_RUNNER_FILES = {os.path.abspath(__file__), os.path.abspath(runpy.__file__), "<frozen runpy>"}


def _program_traceback(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from the first frame that is not run.py's or runpy's (None when there is none,
    e.g. a SyntaxError in the script, whose message itself names the file and line)."""
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name not in _RUNNER_FILES and os.path.abspath(name) not in _RUNNER_FILES:
            return tb
        tb = tb.tb_next
    return None


def _finish(monitor, quiet: bool) -> None:
    # Runs while the program's own exception may be propagating: never replace it with ours.
    try:
        monitor.close()
        if not quiet:
            print(_summary(monitor), file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 -- see above
        _note(quiet, f"could not summarise ({e})")


if __name__ == "__main__":
    _process_main()
