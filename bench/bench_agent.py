# bench/bench_agent.py -- what the agent costs a real training step, the allocator and a read
"""Overhead of vramscope's agent against the alternatives, on one GPU.

    python bench/bench_agent.py --json results.json   # all of it, ~12 min on an H200 (--only gpt2: ~8)

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

GPT2_MODES = ["baseline", "noop_tracker", "agent", "monitor", "profile_ops", "profile",
              "record_history", "profiler", "seed"]
ALLOC_MODES = ["baseline", "noop_tracker", "agent", "agent_1s", "agent_toggle"]
ALLOC_PARTS = ("heavy", "pairs")


# ----------------------------------------------------------------------------- workers
def _gpt2_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self, vocab=50257, d=768, layers=12, heads=12, ctx=512):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as in GPT-2 (124M parameters)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    return GPT()


def worker_gpt2(mode, phases):
    import torch

    phases.mark("import torch")
    monitor = None
    if mode in ("agent", "monitor", "profile_ops", "profile"):
        import vramscope
        vramscope.attach(init_cuda=True)
        if mode != "agent":
            monitor = vramscope.Monitor(every=0, exit_table_rows=0)
            monitor.start()
    elif mode == "record_history":
        torch.cuda.memory._record_memory_history(max_entries=100000)
    elif mode == "noop_tracker":
        # torch's own cost of having any trace tracker (it builds a TraceEntry per event).
        from vramscope import _agent
        torch.cuda.init()
        _agent._bench_attach_noop_tracker()
    phases.mark("attach")
    with torch.device("cuda"):  # initialise on the GPU: CPU init of 124M parameters is slow
        model = _gpt2_model(torch)
    phases.mark("model")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    batch, seq = 16, 512
    monitor_ms = []  # what Monitor.step() itself costs (under profile(): leak snapshots too)

    def step():
        idx = torch.randint(0, 50257, (batch, seq + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if monitor is not None:
            t0 = time.perf_counter()
            monitor.step()
            monitor_ms.append((time.perf_counter() - t0) * 1e3)
        elif mode == "seed":
            torch.cuda.memory_allocated()
            torch.cuda.memory_reserved()

    def timed(n):
        times = []
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return times

    timed(3)
    phases.mark("warm-up")
    if mode == "profiler":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     profile_memory=True):
            times = timed(4)
    elif mode in ("profile", "profile_ops"):
        # vramscope.profile(): per-op attribution (RecordFunction, in C++), plus per-module
        # attribution (torch's global module hooks, in Python) unless profile_ops.
        with vramscope.profile(modules=mode == "profile"):
            times = timed(15)
    else:
        times = timed(30)
    phases.mark("measure")
    result = {"step_ms": statistics.median(times)}
    if monitor_ms:
        result["monitor_step_ms"] = statistics.median(monitor_ms[-len(times):])
    return result


def worker_alloc(mode, phases, parts):
    import timeit

    import torch

    from vramscope import _agent

    torch.cuda.init()
    x = torch.randn(256, device="cuda")
    if mode in ("agent", "agent_1s", "agent_toggle"):
        import vramscope
        # agent_1s: the agent thread ticks once a second instead of every 10 ms, which separates
        # the tracker callback's cost from the thread's (draining, polling, publishing).
        vramscope.attach(init_cuda=True, interval_ms=1000.0 if mode == "agent_1s" else 10.0)
    elif mode == "noop_tracker":
        _agent._bench_attach_noop_tracker()

    main_cpu = os.environ.get("VRAMSCOPE_BENCH_MAIN_CPU")
    if main_cpu:
        # This thread only (Linux: pid 0 is the calling thread); threads made earlier (CUDA's,
        # the agent's) keep the process's CPUs. A launch-bound step then always runs on the
        # same core, whatever the mode.
        os.sched_setaffinity(0, {int(main_cpu)})

    def heavy_step():
        y = x
        for _ in range(2000):
            y = y * 1.0001 + 0.001
        return y

    for _ in range(5):
        heavy_step()
    torch.cuda.synchronize()
    heavy = []
    for _ in range(30):
        t0 = time.perf_counter()
        heavy_step()
        torch.cuda.synchronize()
        heavy.append((time.perf_counter() - t0) * 1e3)
    result = {"heavy_step_ms": statistics.median(heavy), "heavy_step_min_ms": min(heavy)}
    if mode == "agent_toggle":
        result.update(toggled_steps(heavy_step, torch.cuda.synchronize))
    if "pairs" not in parts:
        phases.mark("measure")
        return result

    alloc, delete = torch.cuda.caching_allocator_alloc, torch.cuda.caching_allocator_delete
    pairs = 100_000

    def pair_loop():
        for _ in range(pairs):
            delete(alloc(4096))

    pair_loop()
    pair_ns = statistics.median(timeit.repeat(pair_loop, number=1, repeat=5)) / pairs * 1e9
    # The same pairs timed in C++: no Python loop around them, so tens of ns are visible.
    native = [_agent._bench_alloc_pairs(1_000_000, 4096) for _ in range(5)]
    result.update(alloc_pair_ns=pair_ns, alloc_pair_native_ns=statistics.median(native))

    calls = 200_000
    # torch's read costs ~100 us: 10k calls are plenty and keep this process short.
    read_torch = statistics.median(timeit.repeat(
        torch.cuda.memory_allocated, number=10_000, repeat=5)) / 10_000 * 1e9
    result["read_torch_ns"] = read_torch
    if mode == "agent":
        import vramscope
        for name, fn in (("read_vramscope_ns", vramscope.memory_allocated),
                         ("read_vramscope_dev0_ns", lambda: vramscope.memory_allocated(0))):
            result[name] = statistics.median(timeit.repeat(fn, number=calls, repeat=5)) / calls * 1e9
        result["mode"] = vramscope.mode()
    phases.mark("measure")
    return result


def toggled_steps(step, synchronize, rounds=16, steps=3):
    """vramscope's own share of the step, in one process: the tracker stays attached and blocks
    of steps alternate between the callback doing its work and returning at once (the order
    flips every round). Immune to the process-to-process spread; torch's cost of having a
    tracker at all is the no-op-tracker mode's."""
    from vramscope import _agent

    on, off, ratios = [], [], []
    try:
        for r in range(rounds):
            block = {}
            for paused in ((False, True) if r % 2 == 0 else (True, False)):
                _agent._bench_pause_tracking(paused)
                times = []
                for _ in range(steps):
                    t0 = time.perf_counter()
                    step()
                    synchronize()
                    times.append((time.perf_counter() - t0) * 1e3)
                block[paused] = statistics.median(times)
            on.append(block[False])
            off.append(block[True])
            ratios.append(block[False] / block[True])
    finally:
        _agent._bench_pause_tracking(False)
    return {"toggle_on_ms": statistics.median(on), "toggle_off_ms": statistics.median(off),
            "toggle_overhead_pct": (statistics.median(ratios) - 1) * 100}


class Phases:
    """Wall time of each phase of a worker, on stderr: where a fresh process spends its time."""

    def __init__(self):
        self.last = time.monotonic()
        self.seconds = {}

    def mark(self, name):
        now = time.monotonic()
        self.seconds[name] = round(now - self.last, 2)
        self.last = now


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


def parse_cpus(text):
    """"0-3,8" -> {0, 1, 2, 3, 8}."""
    cpus = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def overhead(value, base):
    return f"{(value / base - 1) * 100:+.1f}%" if base else "n/a"


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
        if b and mode in alloc:
            v = alloc[mode]["heavy_step_ms"]
            lines.append(f"| 2000 small ops step | {mode} | {v:.2f} ms | "
                         f"{overhead(v, b['heavy_step_ms']) if mode != 'baseline' else ''} |")
    t = alloc.get("agent_toggle")
    if t:
        lines.append(f"| 2000 small ops step | agent callback on vs paused, same process | "
                     f"{t['toggle_on_ms']:.2f} vs {t['toggle_off_ms']:.2f} ms | "
                     f"{t['toggle_overhead_pct']:+.1f}% |")
    n, a = alloc.get("noop_tracker"), alloc.get("agent")
    if b and n and a and "alloc_pair_ns" in a:
        for key, what in (("alloc_pair_native_ns", "alloc+free pair, C++ loop (4 KiB)"),
                          ("alloc_pair_ns", "alloc+free pair, Python loop (4 KiB)")):
            lines.append(f"| {what} | baseline (no tracker) | {b[key]:.0f} ns | |")
            lines.append(f"| {what} | no-op tracker | {n[key]:.0f} ns | {n[key] - b[key]:+.0f} ns |")
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
             "alloc": [m for m in ALLOC_MODES if m not in ("agent_1s", "agent_toggle")]}
    if args.only:
        kinds = {args.only: kinds[args.only]}
    if args.modes:
        wanted = {"baseline", *args.modes.split(",")}
        unknown = wanted - set(GPT2_MODES) - set(ALLOC_MODES)
        if unknown:
            parser.error(f"unknown mode(s) {sorted(unknown)}")
        for kind in kinds:
            kinds[kind] = [m for m in (GPT2_MODES if kind == "gpt2" else ALLOC_MODES) if m in wanted]
    parts = [p for p in args.parts.split(",") if p]
    if not parts or set(parts) - set(ALLOC_PARTS):
        parser.error(f"--parts takes a comma-separated subset of {ALLOC_PARTS}")
    if "pairs" in parts and "alloc" in kinds and not {"noop_tracker", "agent"} <= set(kinds["alloc"]):
        parser.error("the pairs part compares baseline, noop_tracker and agent: name them in "
                     "--modes, or use --parts heavy")
    cpus = parse_cpus(args.cpus) if args.cpus else None
    if args.main_cpu is not None:
        if cpus is not None and args.main_cpu not in cpus:
            parser.error("--main-cpu must be one of --cpus")
        os.environ["VRAMSCOPE_BENCH_MAIN_CPU"] = str(args.main_cpu)
    raw = {kind: {mode: [] for mode in modes} for kind, modes in kinds.items()}
    start = time.monotonic()
    for rep in range(args.reps):
        for kind, modes in kinds.items():
            for mode in modes:
                t0 = time.monotonic()
                raw[kind][mode].append(run_worker(kind, mode, parts, cpus))
                # One line per finished process, so a run cut short still leaves its numbers.
                print(f"{kind}/{mode} rep {rep + 1} ({time.monotonic() - t0:.0f} s): "
                      f"{json.dumps(raw[kind][mode][-1])}", file=sys.stderr, flush=True)
        print(f"repetition {rep + 1}/{args.reps} done after {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)
    med, table = summarize(raw)
    print(table)
    if args.json:
        import torch
        meta = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                "reps": args.reps, "seconds": round(time.monotonic() - start, 1),
                "cpus": sorted(cpus) if cpus else None, "main_cpu": args.main_cpu,
                "parts": parts}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "median": med, "runs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
