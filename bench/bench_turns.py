# bench/bench_turns.py -- modes measured in turns: every process alive at once, one steps at a time
"""What the agent costs a step, with the machine's drift paired away.

    python bench/bench_turns.py --step small-ops --midway --procs 4 --cpus 2-7 --main-cpu 3

On the H200 VM a launch-bound step switches between a fast and a slow state (~31 vs ~45 ms)
for seconds at a time, in every process, whatever is attached. Fresh processes run one after the
other therefore differ by ±5 % before anything is measured, and a 3 % goal cannot be judged.
Here --procs processes per mode (baselines included) start at once and take turns: each round
every process runs a block of steps (the first, after another process had the core and the GPU,
is not timed) while the others wait on a pipe, in an order that rotates every round. Blocks of
one round are a fraction of a second apart, so they see the same state. A process's cost is the
median over rounds of its block against the mean of the baselines' blocks of the same round.

Processes also differ for life (±2.5 % between two baselines on the H200 VM: where their memory
landed, their CUDA context), so a mode's cost is the mean over its processes, with a standard
error from the spread of processes within the mode and among the baselines; the baselines read
the same way show what the method calls a difference when there is none. With --midway every
process starts unattached and attaches halfway through the rounds: its cost is its ratio to the
baselines after over before, so what is fixed for its life cancels. Workers run without
address-space randomisation and with a fixed hash seed, so that layout is not one of the
differences (whether that narrows the spread is not measured yet).

Mode agent_toggled measures what neither comparison can separate from the spread between
processes: vramscope's own share of the callback, inside one process. It attaches at once
(--midway or not), and each of its turns runs --block pairs of steps, one step with the callback
doing its work and one with it paused (the tracker returns after reading its gate line: torch's
share, the TraceEntry and the call, stays), in an order that flips from pair to pair; its cost
is the median over all its pairs of the working step against the paused one. The two steps of a
pair are one step apart, so the host's slow and fast states (seconds long) rarely split a pair.
Its row in the table against the baselines is that of an agent attached for the whole run
(about zero with --midway, where it is attached before and after).

Two builds in one run: --build NAME=DIR (a `pip install --target DIR` of another commit) and a
mode written MODE@NAME run those processes with DIR first on their PYTHONPATH, so that, e.g.,
agent_toggled and agent_toggled@before compare two versions of the callback under the same
host state.

Every process pins its stepping thread to --main-cpu (after attaching, so the agent's own thread
keeps --cpus): whichever process has its turn runs on the same core.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import time

from agent_workers import (
    attach_mode,
    gpt2_training_step,
    parse_cpus,
    require_bench_hooks,
    small_ops_step,
    timed_steps,
)

# mode -> what attach_mode() attaches
MODES = {"baseline": "", "noop_tracker": "noop", "agent": "agent", "agent_paused": "agent_paused",
         "agent_1s": "agent_1s", "agent_ledgers": "agent_ledgers", "agent_toggled": "agent"}
TOGGLED = "agent_toggled"
STEPS = {"small-ops": small_ops_step, "gpt2": gpt2_training_step,
         "small-ops-cpu": lambda torch: small_ops_step(torch, "cpu")}
CPU_STEPS = {"small-ops-cpu"}  # no GPU: the agent is attached through its CPU proxy
ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>


# ----------------------------------------------------------------------------- worker side
def worker(step_name, mode, main_cpu, midway):
    """Sets up (attaching at once unless `midway`), says "ready", then answers each "run N" with
    N step times (JSON; agent_toggled: N pairs, {"working": [N times], "paused": [N times]}) and
    "attach" with "attached", until EOF."""
    mode = base_mode(mode)
    import torch
    on_cpu = step_name in CPU_STEPS
    if on_cpu:
        synchronize = lambda: None  # noqa: E731 (CPU ops are done when they return)
    else:
        torch.cuda.init()
        synchronize = torch.cuda.synchronize
    process_cpus = os.sched_getaffinity(0)

    def attach():
        # Threads inherit their creator's CPUs: the agent's thread gets the process's, and only
        # the stepping thread is pinned (pid 0: the calling thread).
        os.sched_setaffinity(0, process_cpus)
        attach_mode(MODES[mode], cpu_proxy=on_cpu)
        if main_cpu is not None:
            os.sched_setaffinity(0, {main_cpu})

    step = STEPS[step_name](torch)
    toggled = mode == TOGGLED
    if toggled:
        require_bench_hooks()
    if not midway or toggled:
        attach()
    elif main_cpu is not None:
        os.sched_setaffinity(0, {main_cpu})
    timed_steps(step, synchronize, 5)  # warm: caches, the allocator's blocks
    print("ready", flush=True)
    turn = 0
    for line in sys.stdin:
        if line.strip() == "attach":
            if not toggled:  # attached from the start
                attach()
                timed_steps(step, synchronize, 5)  # the recorder's first touch
            print("attached", flush=True)
            continue
        count = int(line.split()[1])
        step()  # untimed: the core's caches and the GPU were another process's a moment ago
        synchronize()
        if not toggled:
            print(json.dumps(timed_steps(step, synchronize, count)), flush=True)
            continue
        from vramscope import _agent
        times = {"working": [], "paused": []}
        for _ in range(count):
            for paused in ((False, True) if turn % 2 == 0 else (True, False)):
                _agent._bench_pause_tracking(paused)
                times["paused" if paused else "working"] += timed_steps(step, synchronize, 1)
            turn += 1
        _agent._bench_pause_tracking(False)
        print(json.dumps(times), flush=True)


# ----------------------------------------------------------------------------- runner side
class Turn:
    """One worker process and its pipe."""

    def __init__(self, name, step_name, mode, cpus, main_cpu, midway, python_path=None):
        def prepare():  # in the child, before exec
            if cpus:
                os.sched_setaffinity(0, cpus)
            # The same address layout in every worker (Linux personality ADDR_NO_RANDOMIZE):
            # code and heap alignment then no longer differ from process to process.
            libc = ctypes.CDLL(None, use_errno=True)
            libc.personality(ADDR_NO_RANDOMIZE)
        command = [sys.executable, __file__, "--worker", mode, "--step", step_name]
        if main_cpu is not None:
            command += ["--main-cpu", str(main_cpu)]
        if midway:
            command.append("--midway")
        env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                   PYTHONHASHSEED="0")
        if python_path:  # another build of vramscope first (--build)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [python_path,
                                                              env.get("PYTHONPATH")]))
        self.name, self.mode = name, mode
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env, preexec_fn=prepare)

    def expect(self, what):
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise RuntimeError(f"{self.name} exited (code {code}) while {what}")
        return line

    def attach(self):
        self.proc.stdin.write("attach\n")
        self.proc.stdin.flush()
        while self.expect("attaching").strip() != "attached":
            pass

    def run(self, count):
        self.proc.stdin.write(f"run {count}\n")
        self.proc.stdin.flush()
        return json.loads(self.expect(f"running {count} steps"))

    def close(self):
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def process_costs(blocks, baselines):
    """Per process: the median over rounds of its block against the mean of the baselines'
    blocks of the same round, minus one."""
    names = list(blocks[0])
    costs = {}
    for name in names:
        ratios = [b[name] / statistics.fmean(b[x] for x in baselines) - 1 for b in blocks]
        costs[name] = statistics.median(ratios)
    return costs


def mode_estimate(costs, members, baseline_members=()):
    """Mean cost of a mode's processes less the baselines' mean (none: less zero), and its
    standard error from the spread of processes within the mode and among the baselines."""
    mine = [costs[n] for n in members]
    base = [costs[n] for n in baseline_members]
    mean = statistics.fmean(mine) - (statistics.fmean(base) if base else 0.0)
    variance = 0.0
    for values in (mine, base):
        if len(values) > 1:
            variance += statistics.variance(values) / len(values)
    return mean, math.sqrt(variance)


def base_mode(mode):
    """The mode without its @build."""
    return mode.split("@", 1)[0]


def build_of(mode):
    """The NAME of a MODE@NAME, or None."""
    return mode.split("@", 1)[1] if "@" in mode else None


def toggle_costs(toggles):
    """Per agent_toggled process: the median over its pairs of the working step against the
    paused one, minus one."""
    return {name: statistics.median(w / p - 1 for w, p in pairs) for name, pairs in toggles.items()}


def toggle_rows(toggles, turns):
    """Markdown rows for the agent_toggled processes (their Turn in `turns`), and the JSON of
    the same."""
    costs = toggle_costs(toggles)
    if not costs:
        return {}, ""
    rows = ["", "| in one process: working against paused steps | pairs | median over pairs |",
            "|---|---:|---:|"]
    rows += [f"| {n} | {len(toggles[n])} | {c * 100:+.2f} % |" for n, c in costs.items()]
    result = {"processes": {n: c * 100 for n, c in costs.items()}, "modes": {}}
    for mode in dict.fromkeys(t.mode for t in turns if t.name in costs):
        mean, error = mode_estimate(costs, [t.name for t in turns if t.mode == mode])
        rows.append(f"| {mode}: mean ± standard error | | "
                    f"**{mean * 100:+.2f} % ± {error * 100:.2f}** |")
        result["modes"][mode] = {"mean_pct": mean * 100, "standard_error_pct": error * 100}
    return result, "\n".join(rows)


def summarize(turns, blocks, attach_round=None):
    """Markdown rows: each mode's cost against the baselines of the same rounds, then each
    process's. With `attach_round` (midway), a process's cost is its ratio to the baselines
    after that round over its ratio before: what is fixed for its life cancels."""
    baselines = [t.name for t in turns if t.mode == "baseline"]
    if attach_round is None:
        costs = process_costs(blocks, baselines)
    else:
        before = process_costs(blocks[:attach_round], baselines)
        after = process_costs(blocks[attach_round:], baselines)
        costs = {n: (1 + after[n]) / (1 + before[n]) - 1 for n in before}
    modes = list(dict.fromkeys(t.mode for t in turns))
    timed = blocks if attach_round is None else blocks[attach_round:]  # step medians: after
    rows = ["| mode | processes | step median | vs baselines, same rounds: mean ± standard error |",
            "|---|---:|---:|---:|"]
    result = {"modes": {}, "processes": {}}
    for mode in modes:
        members = [t.name for t in turns if t.mode == mode]
        mean, error = mode_estimate(costs, members, baselines)
        step_ms = statistics.median(statistics.fmean(b[n] for n in members) for b in timed)
        if mode == "baseline":
            # Zero by construction; what shows is how far single processes stray from it.
            spread = statistics.stdev(costs[n] for n in members)
            cell = f"zero; processes spread by {spread * 100:.2f} % (standard deviation)"
        else:
            cell = f"**{mean * 100:+.2f} % ± {error * 100:.2f}**"
        rows.append(f"| {mode} | {len(members)} | {step_ms:.2f} ms | {cell} |")
        result["modes"][mode] = {"processes": len(members), "step_ms": step_ms,
                                 "vs_baselines_pct": mean * 100, "standard_error_pct": error * 100}
    rows += ["", "| process | step median | vs baselines, same rounds (median over rounds) |",
             "|---|---:|---:|"]
    for t in turns:
        step_ms = statistics.median(b[t.name] for b in timed)
        rows.append(f"| {t.name} | {step_ms:.2f} ms | {costs[t.name] * 100:+.2f} % |")
        result["processes"][t.name] = {"mode": t.mode, "step_ms": step_ms,
                                       "vs_baselines_pct": costs[t.name] * 100}
    return result, "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", choices=sorted(STEPS), default="small-ops",
                        help="the step: small-ops (2000 small ops, 12000 allocator events; "
                        "default), gpt2 (GPT-2-small training step), or small-ops-cpu (the "
                        "small-ops loop on CPU tensors, traced through the agent's CPU proxy, "
                        "for a machine without a GPU: modes agent and agent_toggled only; a "
                        "proxy for ranking builds, not the GPU's figure)")
    choices = sorted(set(MODES) - {"baseline"})
    parser.add_argument("--modes", default="noop_tracker,agent",
                        help=f"modes besides the baselines, from {choices} "
                        "(default noop_tracker,agent; agent_toggled: the agent attached "
                        "throughout, each turn --block pairs of steps with its callback working "
                        "and paused, compared in-process; MODE@NAME: that mode on --build NAME)")
    parser.add_argument("--midway", action="store_true",
                        help="start every process unattached and attach halfway (after half of "
                        "--rounds, or of --seconds): each process is then its own reference, "
                        "before and after, while the baselines still pair the rounds")
    parser.add_argument("--procs", type=int, default=3,
                        help="processes per mode, baselines included (default 3, at least 2)")
    parser.add_argument("--rounds", type=int, default=150, help="rounds of turns (default 150)")
    parser.add_argument("--block", type=int, default=3, help="timed steps per turn (default 3)")
    parser.add_argument("--seconds", type=float,
                        help="stop starting rounds after this many seconds (a device call's limit)")
    parser.add_argument("--cpus", default="", help="pin every process to these CPUs, e.g. 2-7")
    parser.add_argument("--main-cpu", type=int,
                        help="pin each process's stepping thread to this CPU (one of --cpus)")
    parser.add_argument("--build", action="append", default=[], metavar="NAME=DIR",
                        help="another build of vramscope (pip install --target DIR), for modes "
                        "written MODE@NAME (repeatable)")
    parser.add_argument("--json", help="write every block, every toggled pair and the summary "
                        "to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.step, args.worker, args.main_cpu, args.midway)
        return

    builds = {}
    for spec in args.build:
        name, _, path = spec.partition("=")
        if not name or not path or not os.path.isdir(os.path.join(path, "vramscope")):
            parser.error(f"--build {spec!r}: expected NAME=DIR with DIR/vramscope installed "
                         "(pip install --target DIR)")
        builds[name] = os.path.abspath(path)
    modes = [m for m in args.modes.split(",") if m]
    unknown = {m for m in modes if base_mode(m) not in MODES or base_mode(m) == "baseline"}
    if unknown:
        parser.error(f"--modes: unknown or reserved {sorted(unknown)}; choose from "
                     f"{choices}")
    no_proxy = {m for m in modes if base_mode(m) not in ("agent", TOGGLED)}
    if args.step in CPU_STEPS and no_proxy:
        parser.error(f"--modes: {sorted(no_proxy)} have no CPU proxy; --step {args.step} "
                     f"measures agent and {TOGGLED} only")
    unbuilt = {m for m in modes if build_of(m) is not None and build_of(m) not in builds}
    if unbuilt:
        parser.error(f"--modes: {sorted(unbuilt)} name a build no --build gives")
    if args.rounds < 4 or args.block < 1 or args.procs < 2:
        parser.error("--rounds must be at least 4, --block at least 1 and --procs at least 2")
    cpus = parse_cpus(args.cpus) if args.cpus else None
    if args.main_cpu is not None and cpus is not None and args.main_cpu not in cpus:
        parser.error("--main-cpu must be one of --cpus")

    # Interleaved by mode (baseline-1, agent-1, baseline-2, agent-2, ...) so that rotating the
    # order moves every mode through every position.
    specs = [(f"{m}-{i + 1}", m) for i in range(args.procs) for m in ["baseline", *modes]]
    turns = [Turn(name, args.step, mode, cpus, args.main_cpu, args.midway,
                  builds.get(build_of(mode)))
             for name, mode in specs]
    start = time.monotonic()
    blocks = []
    toggles = {}  # agent_toggled process -> its (working, paused) step pairs
    attach_round = None
    try:
        for t in turns:
            while t.expect("starting").strip() != "ready":
                pass  # anything the setup printed on stdout
        print(f"{len(turns)} processes ready after {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)
        start = time.monotonic()
        for r in range(args.rounds):
            elapsed = time.monotonic() - start
            if args.seconds and r >= 4 and elapsed + elapsed / r > args.seconds:
                print(f"stopping after {r} rounds (--seconds)", file=sys.stderr, flush=True)
                break
            if args.midway and attach_round is None and (
                    r == args.rounds // 2 or (args.seconds and elapsed >= args.seconds / 2)):
                attach_round = r
                for t in turns:
                    if t.mode != "baseline":
                        t.attach()
                print(f"attached after round {r}", file=sys.stderr, flush=True)
            shift = r % len(turns)
            order = turns[shift:] + turns[:shift]
            if (r // len(turns)) % 2:
                order.reverse()  # who goes first and who follows whom both vary
            block = {}
            for t in order:
                times = t.run(args.block)
                if base_mode(t.mode) == TOGGLED:
                    toggles.setdefault(t.name, []).extend(zip(times["working"], times["paused"]))
                    times = times["working"]
                block[t.name] = statistics.median(times)
            blocks.append(block)
    finally:
        for t in turns:
            t.close()
    if args.midway and (attach_round is None or attach_round < 2 or len(blocks) - attach_round < 2):
        sys.exit("too few rounds before or after the midway attach to compare")
    result, table = summarize(turns, blocks, attach_round)
    result["toggled"], toggle_table = toggle_rows(toggles, turns)
    table += toggle_table
    when = f", attached after round {attach_round}" if args.midway else ""
    print(f"{args.step} step, {len(turns)} processes, {len(blocks)} rounds of {args.block} timed "
          f"steps per process{when}, {time.monotonic() - start:.0f} s")
    print(table)
    if args.json:
        meta = {"step": args.step, "rounds": len(blocks), "block": args.block, "procs": args.procs,
                "attach_round": attach_round,
                "cpus": sorted(cpus) if cpus else None, "main_cpu": args.main_cpu}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "summary": result, "blocks": blocks, "toggled_pairs": toggles},
                      f, indent=1)


if __name__ == "__main__":
    main()
