# bench/bench_agent.py -- what the agent costs a real training step, the allocator and a read
"""Overhead of vramscope's agent against the alternatives, on one GPU.

    python bench/bench_agent.py --json results.json   # all of it: ~12 min on an H200
    python bench/bench_agent.py --only gpt2           # the GPT-2 step only: ~8 min

Every measurement runs in a fresh process (the agent and the profilers cannot be detached),
modes are interleaved across repetitions so that clock and thermal drift hit all of them alike,
and each number is the median over repetitions of the in-process median.

  gpt2   GPT-2-small-sized training step in plain torch (12 layers, d=768, 12 heads, vocab 50257,
         B=16, T=512, bf16 autocast, AdamW, random tokens): baseline, a no-op trace tracker
         (torch's own cost of any tracker), vramscope agent alone
         (attached, tracking every event, publishing), agent + a Monitor step per step,
         vramscope.profile(modules=False) (per-op attribution only; goal ≤3 %),
         vramscope.profile() (per-op and per-module attribution),
         _record_memory_history(max_entries=100000), torch.profiler with
         profile_memory=True (a few steps only), and the seed's approach (memory_allocated() and
         memory_reserved() read every step).
  alloc  an allocator-heavy step (2000 small elementwise ops: launch-bound, 12000 allocator
         events), caching_allocator_alloc/delete pairs (ns per pair), and the cost of reading
         current stats from Python (ns per call): baseline, no-op tracker, agent, and (when named)
         agent_1s, the agent ticking once a second, which isolates the tracker callback's cost,
         and agent_toggle: in one process, blocks of steps with the callback working or
         paused, alternating (vramscope's own share, free of the process-to-process spread).
         midway_noop / midway_agent: in one process, 40 steps with nothing attached, then the
         no-op tracker or the agent attached, then 40 steps: the whole cost as an in-process
         ratio, read against midway_control (the same with nothing attached: the drift);
         midway_agent_paused (the agent attached, its callback's work paused: what the agent
         costs besides that work) and midway_agent_1s (its thread ticking once a second).
         `--parts heavy` runs only the step (a ~6 s process instead of ~15 s).

Launch-bound steps vary by tens of percent from process to process when the scheduler moves them
between cores: `--cpus 16-31` pins every worker to the same CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from agent_workers import Phases, parse_cpus, worker_alloc, worker_gpt2

GPT2_MODES = ["baseline", "noop_tracker", "agent", "monitor", "profile_ops", "profile",
              "record_history", "profiler", "seed"]
MIDWAY_MODES = ["midway_control", "midway_noop", "midway_agent", "midway_agent_paused",
                "midway_agent_1s"]
ALLOC_MODES = ["baseline", "noop_tracker", "agent", "agent_1s", "agent_toggle", *MIDWAY_MODES]
DIAGNOSTIC_ALLOC_MODES = ("agent_1s", "agent_toggle", *MIDWAY_MODES)
ALLOC_PARTS = ("heavy", "pairs")


# ----------------------------------------------------------------------------- runner
def run_worker(kind, mode, parts, cpus):
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    # Pinning every worker to the same CPUs removes the core-to-core and migration spread that
    # dominates a launch-bound step (30-52 ms per process unpinned on the H200 VM).
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    out = subprocess.run([sys.executable, __file__, "--worker", kind, "--mode", mode,
                          "--parts", ",".join(parts)],
                         capture_output=True, text=True, env=env, timeout=300, preexec_fn=pin)
    if out.returncode != 0:
        raise RuntimeError(f"{kind}/{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def overhead(value, base):
    return f"{(value / base - 1) * 100:+.1f}%" if base else "n/a"


# A launch-bound process sometimes switches between a fast and a slow state (~30 vs ~45 ms per
# step on the H200 VM, every mode): a process whose step moved by more than this between its two
# midway blocks changed state, and its ratio says nothing about what was attached.
STATE_SWITCH_PCT = 15.0


def midway_lines(control, attached, what):
    """Rows for one midway mode: the median after/before ratio of the processes that stayed in
    one state, read against the control's."""
    rows = []
    for key, stat in (("after_vs_before_pct", "median"), ("after_vs_before_min_pct", "min")):
        kept = {}
        for name, results in (("control", control), ("attached", attached)):
            kept[name] = [r[key] for r in results if abs(r[key]) <= STATE_SWITCH_PCT]
        if not kept["control"] or not kept["attached"]:
            continue
        c, m = statistics.median(kept["control"]), statistics.median(kept["attached"])
        net = ((1 + m / 100) / (1 + c / 100) - 1) * 100
        left_out = len(control) + len(attached) - len(kept["control"]) - len(kept["attached"])
        rows.append(f"| 2000 small ops step | {what} attached midway, step {stat} after vs before "
                    f"(control {c:+.1f}%; {left_out} process(es) that switched state left out) | "
                    f"{m:+.1f}% | **{net:+.1f}%** |")
    return rows


def summarize(raw):
    """Medians over repetitions, and the markdown table."""
    med = {kind: {mode: {k: statistics.median(r[k] for r in runs)
                         for k in runs[0] if isinstance(runs[0][k], (int, float))}
                  for mode, runs in modes.items()}
           for kind, modes in raw.items()}
    lines = ["| benchmark | mode | median | vs baseline |", "|---|---|---:|---:|"]
    gpt2 = med.get("gpt2", {})
    for mode in GPT2_MODES:
        if mode in gpt2:
            v, b = gpt2[mode]["step_ms"], gpt2["baseline"]["step_ms"]
            lines.append(f"| GPT-2-small train step | {mode} | {v:.2f} ms | {overhead(v, b)} |")
    alloc = med.get("alloc", {})
    b = alloc.get("baseline")
    for mode in ALLOC_MODES:
        if b and mode in alloc and "heavy_step_ms" in alloc[mode]:
            v = alloc[mode]["heavy_step_ms"]
            lines.append(f"| 2000 small ops step | {mode} | {v:.2f} ms | "
                         f"{overhead(v, b['heavy_step_ms']) if mode != 'baseline' else ''} |")
    t = alloc.get("agent_toggle")
    if t:
        lines.append(f"| 2000 small ops step | agent callback on vs paused, same process | "
                     f"{t['toggle_on_ms']:.2f} vs {t['toggle_off_ms']:.2f} ms | "
                     f"{t['toggle_overhead_pct']:+.1f}% |")
    runs = raw.get("alloc", {})
    if "midway_control" in runs:
        for mode, what in (("midway_noop", "no-op tracker"), ("midway_agent", "agent"),
                           ("midway_agent_paused", "agent with its callback's work paused"),
                           ("midway_agent_1s", "agent ticking once a second")):
            if mode in runs:
                lines += midway_lines(runs["midway_control"], runs[mode], what)
    n, a = alloc.get("noop_tracker"), alloc.get("agent")
    if b and n and a and "alloc_pair_ns" in a:
        for key, what in (("alloc_pair_native_ns", "alloc+free pair, C++ loop (4 KiB)"),
                          ("alloc_pair_ns", "alloc+free pair, Python loop (4 KiB)")):
            lines.append(f"| {what} | baseline (no tracker) | {b[key]:.0f} ns | |")
            lines.append(f"| {what} | no-op tracker | {n[key]:.0f} ns | "
                         f"{n[key] - b[key]:+.0f} ns |")
            lines.append(f"| {what} | agent | {a[key]:.0f} ns | {a[key] - b[key]:+.0f} ns; "
                         f"{a[key] - n[key]:+.0f} ns vs no-op tracker |")
        lines.append(f"| read allocated | torch.cuda.memory_allocated() | "
                     f"{a['read_torch_ns']:.0f} ns | |")
        lines.append(f"| read allocated | vramscope.memory_allocated() | "
                     f"{a['read_vramscope_ns']:.0f} ns | |")
        lines.append(f"| read allocated | vramscope.memory_allocated(0) | "
                     f"{a['read_vramscope_dev0_ns']:.0f} ns | |")
    return med, "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write raw runs and medians to this file")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per mode (default 5)")
    parser.add_argument("--only", choices=["gpt2", "alloc"], help="run one benchmark")
    parser.add_argument("--modes", help="comma-separated modes to run (baseline is always kept), "
                        f"e.g. agent,seed: for a short device lease; GPT-2: any of {GPT2_MODES}; "
                        f"alloc: any of {ALLOC_MODES}")
    parser.add_argument("--parts", default=",".join(ALLOC_PARTS),
                        help="alloc benchmark parts: heavy (the small-ops step), pairs (alloc/free "
                        "pairs and the read cost); default both")
    parser.add_argument("--cpus", default=os.environ.get("VRAMSCOPE_BENCH_CPUS", ""),
                        help="pin every worker to these CPUs, e.g. 16-19 (default: "
                        "$VRAMSCOPE_BENCH_CPUS, else unpinned)")
    parser.add_argument("--main-cpu", type=int,
                        help="alloc benchmark: pin each worker's main thread to this CPU (one of "
                        "--cpus) after attaching, so the launch-bound step always runs on it")
    parser.add_argument("--seconds", type=float,
                        help="time budget: start no repetition that would end after it (judged "
                        "by the last one), then summarize what ran -- for a device call's limit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        phases = Phases()
        if args.worker == "gpt2":
            result = worker_gpt2(args.mode, phases)
        else:
            result = worker_alloc(args.mode, phases, set(args.parts.split(",")))
        result["phase_s"] = phases.seconds
        print(json.dumps(result))
        return

    # The no-op tracker is a diagnostic (torch's own cost of any tracker): only when named, so
    # that the default GPT-2 run fits a 10-minute device call.
    kinds = {"gpt2": [m for m in GPT2_MODES if m != "noop_tracker"],
             "alloc": [m for m in ALLOC_MODES if m not in DIAGNOSTIC_ALLOC_MODES]}
    if args.only:
        kinds = {args.only: kinds[args.only]}
    if args.modes:
        wanted = {"baseline", *args.modes.split(",")}
        unknown = wanted - set(GPT2_MODES) - set(ALLOC_MODES)
        if unknown:
            parser.error(f"unknown mode(s) {sorted(unknown)}")
        for kind in kinds:
            modes = GPT2_MODES if kind == "gpt2" else ALLOC_MODES
            kinds[kind] = [m for m in modes if m in wanted]
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    parts = [p for p in args.parts.split(",") if p]
    if not parts or set(parts) - set(ALLOC_PARTS):
        parser.error(f"--parts takes a comma-separated subset of {ALLOC_PARTS}")
    if ("pairs" in parts and "alloc" in kinds
            and not {"noop_tracker", "agent"} <= set(kinds["alloc"])):
        parser.error("the pairs part compares baseline, noop_tracker and agent: name them in "
                     "--modes, or use --parts heavy")
    cpus = parse_cpus(args.cpus) if args.cpus else None
    if args.main_cpu is not None:
        if cpus is not None and args.main_cpu not in cpus:
            parser.error("--main-cpu must be one of --cpus")
        os.environ["VRAMSCOPE_BENCH_MAIN_CPU"] = str(args.main_cpu)
    raw = {kind: {mode: [] for mode in modes} for kind, modes in kinds.items()}
    start = time.monotonic()
    reps_done = 0
    for rep in range(args.reps):
        if args.seconds and rep > 0:
            elapsed = time.monotonic() - start
            if elapsed + elapsed / rep > args.seconds:
                print(f"stopping after {rep} repetitions: another would end past --seconds "
                      f"{args.seconds:.0f}", file=sys.stderr, flush=True)
                break
        for kind, modes in kinds.items():
            for mode in modes:
                t0 = time.monotonic()
                raw[kind][mode].append(run_worker(kind, mode, parts, cpus))
                # One line per finished process, so a run cut short still leaves its numbers.
                print(f"{kind}/{mode} rep {rep + 1} ({time.monotonic() - t0:.0f} s): "
                      f"{json.dumps(raw[kind][mode][-1])}", file=sys.stderr, flush=True)
        reps_done = rep + 1
        print(f"repetition {rep + 1}/{args.reps} done after {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)
    med, table = summarize(raw)
    print(table)
    if args.json:
        import torch
        meta = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                "reps": reps_done, "seconds": round(time.monotonic() - start, 1),
                "cpus": sorted(cpus) if cpus else None, "main_cpu": args.main_cpu,
                "parts": parts}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "median": med, "runs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
