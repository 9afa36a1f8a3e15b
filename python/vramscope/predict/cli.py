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
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from .budget import DeviceMemory, resolve_budget
from .child import ENV_OUT, ENV_STEPS
from .model import Probe
from .search import ProbeOutOfMemory, search

__all__ = ["main", "probe_argv"]

DESCRIPTION = """\
Finds the largest batch size (or sequence length) that fits GPU memory, before the first OOM.

Each probe runs COMMAND once, with {} replaced by a size, in a fresh process under the agent
(as `vramscope run`), for --steps optimizer steps; the exact step peaks (allocated and
reserved) are read and the process ends. From a few small sizes vramscope fits
    peak = fixed + per-sample x size   (+ per-sample² x size² with --quadratic)
and the cache's overhead (reserved over allocated), and answers the largest size whose
predicted reserved peak fits the budget, with --margin of it kept free. No probe is a size the
model does not already say fits: the search never provokes an OOM.

The command must be `python script.py ...`, `python -m module ...` or `script.py ...`, and
must run optimizer steps (each `optimizer.step()` closes a step)."""

EPILOG = """\
budget:
  card       what the driver has free plus what the process holds (default); a cap the
             program sets itself (set_per_process_memory_fraction) applies
  cap        the program's memory-fraction cap (an error if it sets none)
  12GiB      a size (B, KiB, MiB, GiB, KB, MB, GB), never more than the card
  0.5        a fraction of the device

examples:
  vramscope fit -- python train.py --batch-size {}
  vramscope fit --budget 40GiB --multiple 8 -- python train.py --bs {} --epochs 1
  vramscope fit --over seq_len --quadratic --start 128 -- python lm.py --batch 8 --seq {}

Output: the probes (size, peak allocated, peak reserved), the model (fixed bytes, bytes per
sample, the cache's overhead), the answer with its predicted peak, margin and lower bound.
--json prints the same as one JSON object. Exit 0 with an answer, 1 when none fits or a probe
failed, 2 on a usage error."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vramscope fit", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", default="card", help="card (default), cap, a size or a fraction")
    p.add_argument("--margin", type=float, default=0.05,
                   help="share of the budget kept free (default 0.05)")
    p.add_argument("--steps", type=int, default=3,
                   help="optimizer steps per probe (default 3; the first allocates the "
                        "optimizer state)")
    p.add_argument("--start", type=int, default=None,
                   help="the first size probed (default 1; 32 with --over seq_len)")
    p.add_argument("--limit", type=int, default=None, help="never answer above this size")
    p.add_argument("--multiple", type=int, default=None, help="round the answer down to it")
    p.add_argument("--over", choices=("batch_size", "seq_len"), default="batch_size",
                   help="what {} is (default batch_size)")
    p.add_argument("--quadratic", action="store_true",
                   help="fit a term in size² (attention over a sequence length; always with "
                        "--over seq_len)")
    p.add_argument("--max-probes", type=int, default=8, help="at most this many probes")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds one probe may take (default 600)")
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
    """Runs probes in fresh processes; remembers the smallest budget any of them saw."""

    def __init__(self, command: Sequence[str], args: argparse.Namespace, folder: str) -> None:
        self.command = command
        self.args = args
        self.folder = folder
        self.budget_bytes: int | None = None
        self.budget_source = ""

    def __call__(self, size: int) -> Probe:
        out = os.path.join(self.folder, f"probe-{size}.json")
        env = dict(os.environ)
        env.update({ENV_OUT: out, ENV_STEPS: str(self.args.steps), "VRAMSCOPE_RUN_QUIET": "1"})
        argv = probe_argv(self.command, size)
        print(f"vramscope fit: probing {self.args.over} {size} ...", file=sys.stderr, flush=True)
        began = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=self.args.timeout, check=False)
        seconds = time.perf_counter() - began
        data = None
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                data = json.load(f)
        output = (proc.stdout or "") + (proc.stderr or "")
        tail = output[-2000:]
        if proc.returncode != 0 and ("out of memory" in output.lower() or
                                     "OutOfMemoryError" in output):
            raise ProbeOutOfMemory(size, "the probe process ran out of memory")
        if data is None or not data.get("steps") or proc.returncode != 0:
            raise RuntimeError(f"the probe at {size} measured no step (exit {proc.returncode}); "
                               f"does the program call optimizer.step()?\n{tail}")
        steps = data["steps"]
        device = max(steps, key=lambda r: r["peak_reserved_bytes"])["device"]
        mine = [r for r in steps if r["device"] == device]
        for d in data.get("devices", ()):
            if d["device"] == device:
                mem = DeviceMemory(d["total_bytes"], d["free_bytes"], d["reserved_bytes"],
                                   d["fraction"])
                budget = resolve_budget(_budget_spec(self.args.budget), mem)
                if self.budget_bytes is None or budget.bytes < self.budget_bytes:
                    self.budget_bytes, self.budget_source = budget.bytes, budget.source
        return Probe(size, max(r["peak_allocated_bytes"] for r in mine),
                     max(r["peak_reserved_bytes"] for r in mine), len(mine), seconds)


def _budget_spec(text: str) -> object:
    try:
        value = float(text)
    except ValueError:
        return text
    return value if "." in text else int(value)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        probe_argv(args.command, 1)
        if not 0.0 <= args.margin < 1.0 or args.steps < 1 or args.max_probes < 2:
            raise ValueError("--margin must be in [0, 1), --steps at least 1, --max-probes at "
                             "least 2")
    except ValueError as e:
        print(f"vramscope fit: error: {e}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="vramscope-fit-") as folder:
        runner = _ProbeRunner(args.command, args, folder)
        # The budget is known only after the first probe (from the driver, in that process):
        # probe the first size, then search with the budget it saw.
        first = args.start or (32 if args.over == "seq_len" else 1)
        try:
            probe = runner(first)
        except (RuntimeError, ProbeOutOfMemory) as e:
            print(f"vramscope fit: error: {e}", file=sys.stderr)
            return 1
        if runner.budget_bytes is None:
            print("vramscope fit: error: the probe used no GPU", file=sys.stderr)
            return 1
        quadratic = args.quadratic or args.over == "seq_len"
        try:
            result = search(runner, runner.budget_bytes, margin=args.margin, start=first,
                            limit=args.limit, multiple=args.multiple, quadratic=quadratic,
                            max_probes=args.max_probes, unit="token" if args.over == "seq_len"
                            else "sample", what=args.over, known=[probe])
        except RuntimeError as e:
            print(f"vramscope fit: error: {e}", file=sys.stderr)
            return 1
    import dataclasses

    result = dataclasses.replace(result, budget_source=runner.budget_source)
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        print(result.describe())
    return 0 if result.size > 0 else 1


def to_json(result) -> dict:
    """The result as a JSON object (sizes and bytes as ints)."""
    p = result.prediction
    m = result.model
    return {
        "what": result.what, "answer": result.size, "budget_bytes": result.budget_bytes,
        "budget_source": result.budget_source, "margin_fraction": result.margin_fraction,
        "margin_bytes": result.margin_bytes, "reason": result.reason,
        "prediction": None if p is None else {
            "allocated_bytes": p.allocated_bytes, "reserved_bytes": p.reserved_bytes,
            "margin_bytes": p.margin_bytes, "lower_bound_bytes": p.lower_bound_bytes,
            "basis": p.basis},
        "model": None if m is None else {
            "fixed_bytes": m.fixed_bytes, "bytes_per_unit": m.bytes_per_unit,
            "bytes_per_unit2": m.bytes_per_unit2, "unit": m.unit,
            "cache_overhead_bytes": m.cache_overhead_bytes, "cache_ratio": m.cache_ratio},
        "probes": [{"size": q.size, "peak_allocated_bytes": q.peak_allocated_bytes,
                    "peak_reserved_bytes": q.peak_reserved_bytes, "steps": q.steps,
                    "seconds": round(q.seconds, 3)} for q in result.probes],
    }
