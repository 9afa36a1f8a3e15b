# python/vramscope/predict/cli.py -- `vramscope fit -- python train.py --bs {}`: the probes
"""The command line of ``vramscope fit`` (the C++ CLI hands its arguments to
``python -m vramscope.predict``). Each probe runs the command with ``{}`` replaced by a size, in
a fresh process under the agent (as ``vramscope run``), for a few optimizer steps; the probe
process writes its exact step peaks and ends; the parent fits the memory model, picks the next
size (never one the evidence does not say fits) and prints the model, the answer, its margin
and the probes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import itertools
import json
import math
import os
import re
import signal
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .budget import DeviceMemory, resolve_budget
from .child import ENV_OUT, ENV_STEPS
from .model import Probe
from .peak_file import MAX_BYTES, PeakReport
from .probe import probe_of, probe_report, run_probe
from .search import DEFAULT_MARGIN, FitResult, ProbeOutOfMemory, search
from .window import allocator_retries

__all__ = ["main", "probe_argv"]

DESCRIPTION = """\
Finds the largest batch size (or sequence length) that fits GPU memory, before the first OOM.

Each probe runs COMMAND once, with {} replaced by a size, in a fresh process under the agent
(as `vramscope run`), for --steps optimizer steps; the exact step peaks and what must fit
under a cap are read and the process ends. Under a cap the caching allocator frees its unused
segments and retries before it raises, so what must fit is not the reserved peak but the
smallest cap under which the allocator, serving the probe's requests by its own rules
(simulated on torch's memory history of the probe's steps), does not raise. From a few sizes
vramscope fits
    peak = fixed + per-sample x size   (+ per-sample² x size² with --quadratic)
times the measured allowance (that need over the allocated peak), and answers the largest
size whose need fits the budget, with --margin of it kept free. No probe is a size the model
does not already say fits: the search never provokes an OOM.

The command must be `python script.py ...`, `python -m module ...` or `script.py ...`, and
must run optimizer steps (each `optimizer.step()` closes a step)."""

EPILOG = """\
budget:
  card       what the driver has free plus what the process holds (default); a cap the
             program sets itself (set_per_process_memory_fraction) applies
  cap        the program's memory-fraction cap (an error if it sets none)
  12GiB      a size (B, KiB, MiB, GiB, KB, MB, GB), never more than the card
  0.5        a fraction of the device, in (0, 1] (a number without a unit is a fraction:
             12 is refused, 12GiB is a size)

examples:
  vramscope fit -- python train.py --batch-size {}
  vramscope fit --budget 40GiB --multiple 8 -- python train.py --bs {} --epochs 1
  vramscope fit --over seq_len --quadratic --start 128 -- python lm.py --batch 8 --seq {}

Output: the probes (size, peak allocated, peak reserved), the model (fixed bytes, bytes per
sample, the cache's overhead), the answer with its predicted peak, margin and lower bound.
--json prints the same as one JSON object ("answer": null when none fits).

Probes run side by side when the card has room for all of them at once (what the largest
probe so far shows each needs, and a CUDA context each, within what the card had free when a
probe ran alone): the doublings the first probe shows to fit, then the shares of the answer.
The budget is read only from probes that ran alone.

Each probe runs in a process group of its own: when it exits, what it left running is killed;
past --timeout the whole group is. Only the last 64 KiB of its output are kept, shown when it
fails. A probe ran out of memory only when it says so in its peak file (it caught CUDA's
OutOfMemoryError); any other failure stops the search with the probe's last lines.

exit status: 0 an answer; 1 none fits (not even --start, or not one --multiple), or a probe
failed (its error shown); 2 a usage error, found before any probe runs."""

#: What a probe process holds beside its allocator's segments (its CUDA context and libraries;
#: 0.5-1 GiB on an H200): counted for each probe run side by side.
CONTEXT_BYTES = 1 << 30
#: The largest size, --start, --limit or --multiple (the model's own search stops there).
MAX_SIZE = 1 << 40
#: At most this many steps a probe, probes a search, seconds a probe (a day).
MAX_STEPS = 100
MAX_PROBES = 64
MAX_TIMEOUT_S = 86400.0


def _whole(low: int, high: int) -> Any:
    """An argparse type: decimal digits only (no sign, no spaces), in [low, high]."""

    def parse(text: str) -> int:
        if not re.fullmatch(r"[0-9]{1,15}", text):
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (digits only)")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in [{low}, {high}]")
        return value

    return parse


def _seconds(text: str) -> float:
    """--timeout: a finite number of seconds in (0, a day]."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 < value <= MAX_TIMEOUT_S):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
    return value


def _fraction_kept(text: str) -> float:
    """--margin: a share in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:  # NaN fails both
        raise argparse.ArgumentTypeError(f"{text!r} is not a share in [0, 1), e.g. 0.05")
    return value


_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def parse_budget(text: str) -> Any:
    """--budget as resolve_budget takes it: "card", "cap", a fraction (float in (0, 1]) or a
    size (int bytes, in [1, 2^50)). Raises argparse.ArgumentTypeError (a usage error) for
    anything else, before any probe runs."""
    if text in ("card", "cap"):
        return text
    if _NUMBER.fullmatch(text):
        value = float(text)
        if not 0.0 < value <= 1.0:
            raise argparse.ArgumentTypeError(
                f"{text!r}: a number without a unit is a fraction of the device, in (0, 1]; "
                f"a size needs its unit, e.g. {text}GiB")
        return value
    from .._core.units import parse_size

    try:
        size = parse_size(text)
    except (ValueError, OverflowError):
        size = -1
    if not 0 < size < MAX_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not card, cap, a fraction in (0, 1] or a size below 1 PiB like 12GiB")
    return size


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, in the CLI's style, and exit 2."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{_usage_line(message)}\n")


def _usage_line(message: str) -> str:
    return f"vramscope fit: error: {message} (vramscope fit --help)"



def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="vramscope fit", description=DESCRIPTION, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", default="card", type=parse_budget,
                   help="card (default), cap, a size (12GiB) or a fraction (0.5)")
    p.add_argument("--margin", type=_fraction_kept, default=DEFAULT_MARGIN,
                   help="share of the budget kept free, in [0, 1) (default "
                        f"{DEFAULT_MARGIN:g}: the need already holds what a cap needs above "
                        "the allocated peak, measured)")
    p.add_argument("--steps", type=_whole(1, MAX_STEPS), default=3,
                   help=f"optimizer steps per probe, 1-{MAX_STEPS} (default 3; the first "
                        "allocates the optimizer state)")
    p.add_argument("--start", type=_whole(1, MAX_SIZE), default=None,
                   help="the first size probed (default 1; 32 with --over seq_len)")
    p.add_argument("--limit", type=_whole(1, MAX_SIZE), default=None,
                   help="never answer above this size (at least --start)")
    p.add_argument("--multiple", type=_whole(1, MAX_SIZE), default=None,
                   help="round the answer down to a multiple of it (none fits: no answer)")
    p.add_argument("--over", choices=("batch_size", "seq_len"), default="batch_size",
                   help="what {} is (default batch_size)")
    p.add_argument("--quadratic", action="store_true",
                   help="fit a term in size² (attention over a sequence length; always with "
                        "--over seq_len)")
    p.add_argument("--max-probes", type=_whole(2, MAX_PROBES), default=8,
                   help=f"at most this many probes, 2-{MAX_PROBES} (default 8); the answer is a "
                        "size a probe measured, or one between two: with too few it is the "
                        "largest measured to fit")
    p.add_argument("--timeout", type=_seconds, default=600.0,
                   help="seconds one probe may take, its process group killed after "
                        "(default 600)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="-- then the command, with {} where the size goes")
    return p


_PYTHON = re.compile(r"python[0-9.]*$")


def probe_argv(command: Sequence[str], size: int, python: str = sys.executable) -> list[str]:
    """The argv of one probe: ``command`` with ``{}`` replaced by ``size``, its Python program
    run under ``python -m vramscope.run``. Raises ValueError for a command it cannot run so."""
    cmd = list(command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("missing the command: vramscope fit [options] -- python train.py "
                         "--batch-size {}")
    if not any("{}" in arg for arg in cmd):
        raise ValueError("the command has no {} for the size")
    if _PYTHON.match(os.path.basename(cmd[0])):
        interpreter, program = cmd[0], cmd[1:]
    elif cmd[0].endswith(".py"):
        interpreter, program = python, cmd
    else:
        raise ValueError(f"cannot run {cmd[0]!r} under the agent: the command must be "
                         "`python script.py ...`, `python -m module ...` or `script.py ...`")
    if not program or (program[0].startswith("-") and not program[0].startswith("-m")):
        raise ValueError("after python, the command must name a script or -m module "
                         "(interpreter options are not supported)")
    return [interpreter, "-m", "vramscope.run"] + [a.replace("{}", str(size)) for a in program]


class _ProbeRunner:
    """Runs probes in fresh processes (probe.py); remembers the smallest budget any of them
    saw."""

    def __init__(self, command: Sequence[str], args: argparse.Namespace, folder: str) -> None:
        self.command = command
        self.args = args
        self.folder = folder
        self.budget_bytes: int | None = None
        self.budget_source = ""
        self._count = itertools.count(1)
        #: The probes measured so far, and what the card had for other processes when the
        #: last one that ran alone ended (its free bytes and what it held itself).
        self.probes: list[Probe] = []
        self._card_room: int | None = None

    def __call__(self, size: int, alone: bool = True) -> Probe:
        out = os.path.join(self.folder, f"probe-{next(self._count)}.json")
        env = dict(os.environ)
        env.update({ENV_OUT: out, ENV_STEPS: str(self.args.steps), "VRAMSCOPE_RUN_QUIET": "1"})
        argv = probe_argv(self.command, size)
        print(f"vramscope fit: probing {self.args.over} {size} ...", file=sys.stderr, flush=True)
        try:
            result = run_probe(argv, env, self.args.timeout)
        except OSError as e:
            raise RuntimeError(f"cannot start the probe {argv[0]}: {e.strerror}") from None
        report = probe_report(result, out, size, self.args.over, self.args.timeout)
        if alone:
            # Side by side, each probe sees the others' memory as taken: the budget and the
            # card's room are read only from probes that ran alone.
            self._take_budget(report)
        if report.outcome == "out_of_memory":
            raise ProbeOutOfMemory(size, "its step raised CUDA's OutOfMemoryError")
        if any(not s.peaks_exact for s in report.steps):
            raise RuntimeError("the probe ran without the agent (polling mode): its peaks are "
                               "sampled, not exact, and no answer can stand on them; `python "
                               "-c 'import torch, vramscope; torch.ones(1, device=\"cuda\"); "
                               "print(vramscope.mode())'` says why")
        probe, _ = probe_of(report, size, result.seconds)
        self.probes.append(probe)
        return probe

    def many(self, sizes: Sequence[int]) -> list[Probe | ProbeOutOfMemory]:
        """Probes ``sizes`` side by side when the card has room for all of them at once (each
        bounded by what the largest probe so far shows it needs, with a CUDA context each),
        else one after the other; each a Probe or the ProbeOutOfMemory it raised."""
        def one(size: int, alone: bool) -> Probe | ProbeOutOfMemory:
            try:
                return self(size, alone)
            except ProbeOutOfMemory as oom:
                return oom

        if not self._room_for(sizes):
            return [one(size, True) for size in sizes]
        print(f"vramscope fit: {len(sizes)} probes side by side", file=sys.stderr, flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(sizes)) as pool:
            return list(pool.map(lambda size: one(size, False), sizes))

    def _room_for(self, sizes: Sequence[int]) -> bool:
        if self._card_room is None or not self.probes:
            return False
        top = max(self.probes, key=lambda p: p.size)
        degree = 2 if self.args.quadratic or self.args.over == "seq_len" else 1
        needs = [top.need_at(size / top.size, degree) + CONTEXT_BYTES for size in sizes]
        return sum(needs) <= self._card_room

    def _take_budget(self, report: PeakReport) -> None:
        """The budget on the device the probe used most (checked in peak_file.py)."""
        if report.steps:
            device = max(report.steps, key=lambda s: s.peak_reserved_bytes).device
        elif report.devices:
            device = max(report.devices, key=lambda d: d.reserved_bytes).device
        else:
            return
        d = report.device(device)
        assert d is not None  # every step's device is listed
        self._card_room = d.free_bytes + d.reserved_bytes  # the probe's own is free once it ends
        mem = DeviceMemory(d.total_bytes, d.free_bytes, d.reserved_bytes, d.fraction)
        try:
            budget = resolve_budget(self.args.budget, mem)
        except ValueError as e:
            raise RuntimeError(f"--budget {self.args.budget}: "
                               f"{str(e).removeprefix('vramscope: ')}") from None
        if self.budget_bytes is None or budget.bytes < self.budget_bytes:
            self.budget_bytes, self.budget_source = budget.bytes, budget.source


class _Stopped(BaseException):
    """SIGTERM or SIGHUP while probing: the probe's group is killed on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise _Stopped, so that a probe running is killed and reaped, not
    left behind (its own session does not get the terminal's signals)."""
    def stop(signum: int, _frame: Any) -> None:
        raise _Stopped(signum)

    saved = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            saved[signum] = signal.signal(signum, stop)
    except ValueError:  # not the main thread: no handlers
        pass
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help (0), or a usage error already said (2)
        return e.code if isinstance(e.code, int) else 2
    try:
        probe_argv(args.command, 1)
        first = args.start or (32 if args.over == "seq_len" else 1)
        if args.limit is not None and args.limit < first:
            raise ValueError(f"--limit {args.limit} is below the first size probed ({first}; "
                             "--start sets it)")
        if args.limit is not None and args.multiple is not None and args.multiple > args.limit:
            raise ValueError(f"--multiple {args.multiple} is above --limit {args.limit}: no "
                             "answer could be both")
    except ValueError as e:
        print(_usage_line(str(e)), file=sys.stderr)
        return 2
    try:
        with _stop_signals():
            result = _fit(args, first)
    except _Stopped as e:
        print(f"vramscope fit: stopped by {signal.Signals(e.signum).name}; the probe's process "
              "group was killed", file=sys.stderr)
        return 128 + e.signum
    except RuntimeError as e:
        print(f"vramscope fit: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        print(result.describe())
    return 0 if result.size > 0 else 1


def _probe_torch() -> str:
    """The torch release the probes run (this interpreter's, read without importing it)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return ""


def _fit(args: argparse.Namespace, first: int) -> FitResult:
    """The search, each probe in a fresh process. Raises RuntimeError when a probe failed."""
    with tempfile.TemporaryDirectory(prefix="vramscope-fit-") as folder:
        runner = _ProbeRunner(args.command, args, folder)
        quadratic = args.quadratic or args.over == "seq_len"
        # The budget is known only after the first probe (from the driver, in that process):
        # probe the first size, then search with the budget it saw.
        try:
            known = [runner(first)]
        except ProbeOutOfMemory as oom:
            # Nothing fits: not even the first size ran.
            return FitResult(0, runner.budget_bytes or 0, args.margin, None, None, (),
                             f"{oom}", args.over, runner.budget_source)
        assert runner.budget_bytes is not None  # a probe with a step names its device
        result = search(runner, runner.budget_bytes, margin=args.margin, start=first,
                        limit=args.limit, multiple=args.multiple, quadratic=quadratic,
                        max_probes=args.max_probes, unit="token" if args.over == "seq_len"
                        else "sample", what=args.over, known=known,
                        retries=allocator_retries(torch_version=_probe_torch()),
                        measure_many=runner.many)
    return dataclasses.replace(result, budget_source=runner.budget_source)


def to_json(result) -> dict:
    """The result as a JSON object (sizes and bytes as ints)."""
    p = result.prediction
    m = result.model
    return {
        "what": result.what, "answer": result.size or None,
        "budget_bytes": result.budget_bytes,
        "budget_source": result.budget_source, "margin_fraction": result.margin_fraction,
        "margin_bytes": result.margin_bytes, "reason": result.reason,
        "prediction": None if p is None else {
            "need_bytes": p.need_bytes,
            "allocated_bytes": p.allocated_bytes, "reserved_bytes": p.reserved_bytes,
            "margin_bytes": p.margin_bytes, "lower_bound_bytes": p.lower_bound_bytes,
            "basis": p.basis},
        "model": None if m is None else {
            "fixed_bytes": m.fixed_bytes, "bytes_per_unit": m.bytes_per_unit,
            "bytes_per_unit2": m.bytes_per_unit2, "unit": m.unit,
            "cache_overhead_bytes": m.cache_overhead_bytes, "cache_ratio": m.cache_ratio,
            "allowance": m.allowance},
        "probes": [{"size": q.size, "peak_allocated_bytes": q.peak_allocated_bytes,
                    "peak_reserved_bytes": q.peak_reserved_bytes,
                    "peak_pinned_bytes": q.peak_pinned_bytes,
                    "resident_bytes": q.resident_bytes, "steps": q.steps,
                    "seconds": round(q.seconds, 3)} for q in result.probes],
    }
